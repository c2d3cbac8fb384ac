package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/schemas"
)

// Read a CSV file whose rows are decoded into canonical records, or
// rejected with their place and reason.
func ExampleNewCSV() {
	spec, err := schemas.LoadViewSpec(filepath.Join("testdata", "gestures.yaml"))
	if err != nil {
		fmt.Println(err)
		return
	}
	f, err := os.Open(filepath.Join("testdata", "gestures.csv"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	src, err := ingest.NewCSV(f, "gestures.csv", spec, ingest.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer src.Close()
	for {
		b, err := src.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		ids, labels := schemas.IDs(b.Record), schemas.Labels(b.Record)
		acc, accDim := schemas.ViewValues(b.Record, 0)
		gyro, gyroDim := schemas.ViewValues(b.Record, 1)
		for i := range int(b.Record.NumRows()) {
			label := "null"
			if labels.IsValid(i) {
				label = fmt.Sprint(labels.Value(i))
			}
			fmt.Printf("row %d: id %d label %s acc %v gyro %v\n", b.Rows[i], ids.Value(i), label,
				acc[i*accDim:(i+1)*accDim], gyro[i*gyroDim:(i+1)*gyroDim])
		}
		for _, r := range b.Rejects {
			fmt.Println("rejected:", r.Error())
		}
		b.Record.Release()
	}
	// Output:
	// row 0: id 10 label 1 acc [0.5 -1.25 3] gyro [0.1 0.2]
	// row 1: id 11 label 2 acc [0.001 2 NaN] gyro [0.3 0.4]
	// row 2: id 12 label null acc [7 8 9] gyro [0.5 0.6]
	// rejected: gestures.csv: row 3, column acc_1: value "two" is not a number
	// rejected: gestures.csv: row 4, column gyro: list has 1 values, want 2
}

// Open reads several files, chosen by glob, one batch at a time.
func ExampleOpen() {
	spec, err := schemas.LoadViewSpec(filepath.Join("testdata", "gestures.yaml"))
	if err != nil {
		fmt.Println(err)
		return
	}
	src, err := ingest.Open(context.Background(), spec, []string{filepath.Join("testdata", "*.csv")}, ingest.Options{BatchSize: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer src.Close()
	for {
		b, err := src.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s: %d rows %v, %d rejected\n", filepath.Base(b.Source), b.Record.NumRows(), b.Rows, len(b.Rejects))
		b.Record.Release()
	}
	// Output:
	// gestures.csv: 2 rows [0 1], 0 rejected
	// gestures.csv: 1 rows [2], 1 rejected
	// gestures.csv: 0 rows [], 1 rejected
}
