// Package ingest owns reading multi-view records into canonical Arrow
// records (schemas.InputSchema), from files and from Kafka topics. The files
// are CSV (plain or gzip-compressed, with a header row) and Parquet, in
// either layout of a view — one scalar column per feature (float, double,
// int32 or int64) or one list column per view (a LIST of numbers, or a
// repeated numeric field); a topic holds one JSON object, or an Arrow IPC
// stream of one or many rows, per message (see NewKafka and NewKafkaRange
// below).
//
// A Source yields Batches of at most Options.BatchSize rows (from a topic,
// messages). Every data row of a file, and every message of a topic (every
// row of an Arrow message that reads), ends up either in a Batch's Record
// or in its Rejects (rows that could not be decoded: a non-numeric cell, a
// null feature, a list of the wrong length, a missing id), so no row is
// lost silently. Where a row came from is Batch.Source and
// Batch.Rows: for a file, its name and the row's index among its data rows;
// for a topic, the topic and the message's offset in its partition, with
// the partition in Batch.Partitions (Batch.RowSource names a row as a
// reject would, "topic/partition"). NaN and ±Inf are
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
// become errors too. A page whose header holds a CRC32 is checked against
// it; a damaged page is an error naming its column, page, byte offset and
// rows (its first row is FileError.Row). A file with pages without a CRC
// is logged once: damage inside them may go unnoticed.
//
// A file-level error ends the reading of that file. A Source from Open then
// moves on to its next file if Next is called again; one from NewCSV or
// NewParquet returns io.EOF. The context is checked between batches.
//
// NewKafka reads a Kafka topic as a member of a consumer group instead of
// files, with kafka-go's ConsumerGroup: in each generation of the group a
// member reads every partition it was assigned from the group's committed
// offset, and KafkaConfig.OnAssign and OnRevoke tell it when a generation
// starts (which partitions it owns, from which offsets) and ends (before
// it rejoins). Each message value is one JSON object, one row:
//
//	{"id": 17, "label": 1, "acc": [0.5, -1.25, 3], "gyro_0": 0.1, "gyro_1": 0.2}
//
// The spec's id field must be an integer (no fraction or exponent, within
// int64). The label field is a number, or null or absent for an unlabelled
// row (absent is a reject when Options.RequireLabel is set). Each view is
// given in one of two forms: an array of numbers under the view's name, of
// exactly the view's dimension, or, for a view declared with prefix+dim or
// columns, its flat per-feature fields (x_0, x_1, ... or the columns), all
// of them; a list view has only the array form. Fields the spec does not
// name are ignored, as is white space. Numbers are read to the bits of
// strconv.ParseFloat; on processors with AVX-512 (VBMI2, as on Intel's Ice
// Lake and AMD's Zen 4 and after) the plain numbers of an array, those of
// at most 19 digits and three of exponent, are read many at a time in one
// pass over their bytes, the others one by one. A message is rejected,
// with a reason naming the field and, for a view, the item or feature, when
// it is not valid JSON or not an object, lacks the id or a view, gives a
// field it reads (the id, the label, a view or a feature) twice, has an id
// that is not an integer, a label that is not a number or null, a view
// array of the wrong length, an item or feature that is null or not a
// number, a number too large for float64, or a view in both forms. A reject
// keeps the message value (RowError.Payload) for a dead-letter topic; its
// Source is "topic/partition" and its Row the offset. Batches hold at most
// Options.BatchSize messages: Next waits for the first one, takes those
// that have arrived, and waits for more only while more are known to be
// coming (on the broker, or fetched), for at most KafkaConfig.MaxWait:
// at light load a record is not held for a batch that will not fill.
// Offsets are committed only when a batch's Ack is called, so a message
// whose batch was not acked is read again by the group after a restart
// or a rebalance: delivery is at least once.
//
// A record message may also be an Arrow IPC stream (KafkaConfig.Format:
// by default a message whose content-type header says
// schemas.ArrowStreamType) of the canonical record, one or many rows:
// the id field (int64), the label field (float64, optional) and one
// field per view named after it, a fixed-size list of float64 of the
// view's dimension or a list of float64 whose rows have it; fields are
// found by name and others are ignored. A message that does not read as
// such a stream is a reject whole, as a JSON message is; a row with a
// null id, a null view or item, a NaN or infinite value or label, or a
// list of the wrong length is a reject alone, whose Payload is the row as
// a one-row IPC stream of the message's schema (ContentType
// schemas.ArrowStreamType), and the message's other rows are in the
// batch, each located by the message's partition and offset.
// Batch.RowPayload gives the same form of any row of an Arrow message
// refused later. arrow's IPC reader trusts a message's metadata, so the
// decoder checks it first (see MaxArrowMessageBuffers and
// checkMetadata). A message that repeats the schema of the message before
// it, with uncompressed record batches of good rows, is decoded without
// arrow's reader, straight from its bytes into the batch
// (kafka_arrow_direct.go); whatever that path declines goes to arrow's
// reader, and a batch of one such message whose rows are all good is then
// that message's record batch, its buffers shared.
//
// With KafkaConfig.LabelsTopic the same group also reads a topic of labels
// that arrive apart from their records, each message a JSON object with
// the spec's id and label fields, the label a number or null (no label
// known):
//
//	{"id": 17, "label": 1}
//
// Other fields are ignored; a message that is not such an object, lacks
// either field or gives one twice is a reject, as a record's is. The two
// topics must be co-partitioned — as many partitions, both keyed by id
// with the same partitioner — so that the member owning partition p of
// the records owns partition p of the labels: the range assignor gives it
// both, and a generation that finds the partition counts differ fails the
// source. KafkaSource.NextLabels delivers the labels of a partition only
// once OnAssign returned for its generation (a member restores what it
// needs of a newly owned partition there, reading the records before the
// committed offset with NewKafkaRange and KafkaRangeConfig.Ends), and
// KafkaSource.CommitLabels commits them when the caller is done with them;
// KafkaSource.CommitLabelsHandled also records, in the commit's metadata,
// the offset below which every message was handled, which the next
// assignment of the partition carries (Assignment.LabelsHandled), so that
// the messages read again from an offset held back are not handled twice.
//
// NewKafkaRange reads a bounded range of a topic, in the same message
// format, for jobs that must end, such as a scheduled retraining on the
// records produced between two times: the messages with a timestamp in
// [KafkaRangeConfig.From, KafkaRangeConfig.To), a zero bound being none.
// When it is opened it looks up, for every partition (or those of
// KafkaRangeConfig.Ends, each up to the offset given there), the first
// offset whose timestamp is at or after From and the end offset (the high
// watermark then), so messages produced later are never read and Next
// returns io.EOF once every partition was read to its end offset. As
// Kafka timestamps need not grow with offsets, a message out of [From,
// To) met before a partition's end is skipped, not taken as the end.
// Partitions are read one after the other, in partition order and offset
// order; rejects are as for NewKafka. It uses no consumer group and
// commits nothing (Batch.Ack is nil); KafkaRangeSource.Reopen reads the
// same offsets again, and KafkaRangeOpener gives a job that reads its
// input twice an opener whose second opening does so. Both Kafka sources
// reach the brokers as a kafkaconn.Config says.
//
// ingest knows formats and schemas, never the math.
package ingest
