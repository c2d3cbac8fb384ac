// Package ingest owns reading multi-view records from files into canonical
// Arrow records (schemas.InputSchema): CSV (plain or gzip-compressed, with a
// header row) and Parquet, in either layout of a view — one scalar column per
// feature (float, double, int32 or int64) or one list column per view (a
// LIST of numbers, or a repeated numeric field).
//
// A Source yields Batches of at most Options.BatchSize rows. Every data row
// of a file ends up either in a Batch's Record or in its Rejects (rows that
// could not be decoded: a non-numeric cell, a null feature, a list of the
// wrong length, a missing id), so no row is lost silently. NaN and ±Inf are
// valid numbers here: schemas.CheckRecord reports them where they matter.
// Problems of a whole file (a missing column, a column of the wrong type, a
// corrupt Parquet or gzip stream) are errors of type *FileError naming the
// file and, where known, the column and row.
//
// Ids come from the spec's id column, which must hold integers. A file
// without that column gets running ids: the row's position among all data
// rows the Source has read so far, counting rejected rows, so ids stay unique
// across the files of one Source. A file without the label column gives
// null labels (an error when Options.RequireLabel is set); a null or empty
// label cell gives a null label. Columns the spec does not name are ignored.
//
// Parquet is decoded page by page straight into the Arrow buffers, column by
// column, so memory is bounded by one batch plus one page per column, not by
// the file. Because parquet-go allocates whatever a file's footer and page
// headers claim, those are checked first: a page may hold at most 64 MiB
// uncompressed and 16 Mi values, and a file that claims more is reported
// as corrupt rather than trusted. Panics of parquet-go on malformed input
// become errors too.
//
// A file-level error ends the reading of that file. A Source from Open then
// moves on to its next file if Next is called again; one from NewCSV or
// NewParquet returns io.EOF. The context is checked between batches.
//
// ingest knows formats and schemas, never the math.
package ingest
