package export

import (
	"errors"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// DefaultRowGroupSpans is the row group size when Options leaves it zero:
// large enough for DuckDB and Spark to read a group per thread with little
// per-group overhead, small enough that the writer's buffer stays in the
// tens of megabytes for spans of a few kilobytes.
const DefaultRowGroupSpans = 50_000

// MaxRowGroupSpans bounds Options.RowGroupSpans: a row group is held in
// memory until it is complete.
const MaxRowGroupSpans = 1_000_000

// Options configures a Writer.
type Options struct {
	// RowGroupSpans is the number of spans per row group (0: the default).
	// The writer holds one row group in memory, encoded and compressed.
	RowGroupSpans int
	// Metadata is added to the file's key/value metadata (besides
	// "rastro.export.schema"), e.g. the filter and window of the export.
	Metadata map[string]string
}

// Validate reports options NewWriter cannot honour.
func (o Options) Validate() error {
	if o.RowGroupSpans < 0 || o.RowGroupSpans > MaxRowGroupSpans {
		return fmt.Errorf("row group size must be between 1 and %d spans, got %d", MaxRowGroupSpans, o.RowGroupSpans)
	}
	return nil
}

// Writer streams rows into one Parquet file: every RowGroupSpans rows it
// writes a row group out, so memory stays bounded by one row group whatever
// the number of spans. It is not safe for concurrent use.
type Writer struct {
	pw   *parquet.GenericWriter[Row]
	rows int64
	err  error
}

// NewWriter starts a Parquet file on out. Nothing is readable until Close
// has written the footer.
func NewWriter(out io.Writer, o Options) (*Writer, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	n := o.RowGroupSpans
	if n == 0 {
		n = DefaultRowGroupSpans
	}
	opts := []parquet.WriterOption{
		parquet.MaxRowsPerRowGroup(int64(n)),
		parquet.Compression(&zstd.Codec{Level: zstd.SpeedDefault}),
		parquet.KeyValueMetadata("rastro.export.schema", SchemaVersion),
	}
	for k, v := range o.Metadata {
		opts = append(opts, parquet.KeyValueMetadata(k, v))
	}
	return &Writer{pw: parquet.NewGenericWriter[Row](out, opts...)}, nil
}

// Write appends rows. After an error the Writer only returns it again.
func (w *Writer) Write(rows []Row) error {
	if w.err != nil {
		return w.err
	}
	n, err := w.pw.Write(rows)
	w.rows += int64(n)
	if err != nil {
		w.err = fmt.Errorf("write parquet rows: %w", err)
	}
	return w.err
}

// Rows is the number of rows written so far.
func (w *Writer) Rows() int64 { return w.rows }

// Close flushes the last row group and writes the footer. It does not close
// the underlying io.Writer.
func (w *Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	if err := w.pw.Close(); err != nil {
		w.err = fmt.Errorf("finish parquet file: %w", err)
		return w.err
	}
	w.err = errors.New("export: writer closed")
	return nil
}
