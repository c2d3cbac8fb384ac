package schemas_test

import (
	"fmt"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/mvml/mvml/schemas"
)

func ExampleParseViewSpec() {
	spec, err := schemas.ParseViewSpec([]byte(`
task: classification
views:
  - {name: acc, prefix: acc_, dim: 3}
  - {name: gyro, columns: [gx, gy]}
  - {name: spectrum, list: fft, dim: 64, kernel: {type: rbf, sigma: median}}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("id and label columns:", spec.ID, spec.Label)
	for _, v := range spec.Views {
		fmt.Printf("view %s: %d features, flat columns %v\n", v.Name, v.Dimension(), v.ColumnNames())
	}

	// An error says where, what was found and what is wanted.
	_, err = schemas.ParseViewSpec([]byte(`{"task": "classification", "views": [{"name": "acc", "prefix": "acc_", "dim": "three"}]}`))
	fmt.Println(err)
	// Output:
	// id and label columns: id label
	// view acc: 3 features, flat columns [acc_0 acc_1 acc_2]
	// view gyro: 2 features, flat columns [gx gy]
	// view spectrum: 64 features, flat columns []
	// line 1: views[0].dim: found the string "three", want an integer
}

// A decoder fills whole columns in place, drops a bad row by compacting,
// and takes the rows it kept as a record, without a copy.
func ExampleRecordBuilder() {
	spec, err := schemas.ParseViewSpec([]byte(`{"task": "regression", "views": [{"name": "x", "prefix": "x_", "dim": 2}]}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	b := schemas.NewRecordBuilder(memory.NewGoAllocator(), spec)
	defer b.Release()
	b.Reserve(3)
	copy(b.IDs(), []int64{7, 8, 9})
	copy(b.View(0), []float64{0.5, 1.5, -1, -2, 4, 4.5}) // row-major, Dim(0) values per row
	b.SetLabel(0, 2.5, true)
	b.SetLabel(1, 0, false) // unknown: null
	b.SetLabel(2, 3.5, true)
	// Row 1 turned out bad: row 2 takes its place.
	b.MoveRow(1, 2)
	b.SetLen(2)
	rec := b.NewRecord()
	defer rec.Release()
	vals, dim := schemas.ViewValues(rec, 0)
	fmt.Println(schemas.IDs(rec), schemas.Labels(rec), vals, dim)
	// Output: [7 9] [2.5 3.5] [0.5 1.5 4 4.5] 2
}

func ExampleRecordBuilder_Append() {
	spec, err := schemas.ParseViewSpec([]byte(`{"task": "classification", "views": [
		{"name": "a", "prefix": "a_", "dim": 2}, {"name": "b", "list": "b", "dim": 1}]}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	b := schemas.NewRecordBuilder(memory.NewGoAllocator(), spec)
	defer b.Release()
	b.Append(1, 0, true, [][]float64{{0.1, 0.2}, {3}})
	b.Append(2, 0, false, [][]float64{{0.3, 0.4}, {5}})
	rec := b.NewRecord()
	defer rec.Release()
	for i, col := range rec.Columns() {
		fmt.Println(rec.ColumnName(i), col.DataType(), col)
	}
	// Output:
	// id int64 [1 2]
	// label float64 [0 (null)]
	// a fixed_size_list<item: float64, nullable>[2] [[0.1 0.2] [0.3 0.4]]
	// b fixed_size_list<item: float64, nullable>[1] [[3] [5]]
}

func ExampleOutputBuilder() {
	// A three-class model's scores, with each of its two views'
	// contribution to the decision of the predicted class.
	b := schemas.NewOutputBuilder(memory.NewGoAllocator(), schemas.OutputSchema(3, 2, true))
	defer b.Release()
	b.Append(17, "5f2c0e9a1b3d", 2, []float64{-0.75, 0.125, 1.5}, []float64{1, 0.5})
	b.Append(18, "5f2c0e9a1b3d", 1, []float64{-0.5, 0.25, -1}, []float64{0.125, 0.125})
	rec := b.NewRecord()
	defer rec.Release()
	for i, col := range rec.Columns() {
		fmt.Println(rec.ColumnName(i), col)
	}
	// Output:
	// id [17 18]
	// model_version ["5f2c0e9a1b3d" "5f2c0e9a1b3d"]
	// prediction [2 1]
	// decision [[-0.75 0.125 1.5] [-0.5 0.25 -1]]
	// contributions [[1 0.5] [0.125 0.125]]
}
