package dynamo

import (
	"bytes"
	"compress/flate"
	"encoding/json"
	"io"
	"sync"
)

// Compressors are reused: a new flate writer allocates about 1 MB (its
// window and hash chains) and a new reader about 40 KB, and a write of a
// run deflates its row and its events. With a new writer each time the
// store's own client-side work was 17.7 ms and 6.7 MB of allocations per
// suspend, decide, claim and load (BenchmarkStoreOverhead).
var (
	rowWriters  = sync.Pool{New: func() any { return mustWriter(flate.NewWriterDict(io.Discard, flate.BestCompression, []byte(rowDict))) }}
	jsonWriters = sync.Pool{New: func() any { return mustWriter(flate.NewWriter(io.Discard, flate.BestCompression)) }}
	rowReaders  sync.Pool // of io.ReadCloser primed with rowDict
	jsonReaders sync.Pool // of io.ReadCloser without a dictionary
)

func mustWriter(zw *flate.Writer, err error) *flate.Writer {
	if err != nil { // only for a level out of range
		panic(err)
	}
	return zw
}

// deflateTo writes what write writes into buf, deflated by a writer of
// pool (rowWriters or jsonWriters).
func deflateTo(pool *sync.Pool, buf *bytes.Buffer, write func(io.Writer) error) error {
	zw := pool.Get().(*flate.Writer)
	defer func() {
		zw.Reset(io.Discard) // keeps no reference to buf
		pool.Put(zw)
	}()
	zw.Reset(buf)
	if err := write(zw); err != nil {
		return err
	}
	return zw.Close()
}

// inflateFrom calls read with a reader of the deflated b, a reader of pool
// (rowReaders with dict rowDict, or jsonReaders with none).
func inflateFrom(pool *sync.Pool, dict string, b []byte, read func(io.Reader) error) error {
	src := bytes.NewReader(b)
	zr, _ := pool.Get().(io.ReadCloser)
	if zr == nil {
		zr = flate.NewReaderDict(src, []byte(dict))
	} else if err := zr.(flate.Resetter).Reset(src, []byte(dict)); err != nil {
		return err
	}
	defer func() {
		_ = zr.(flate.Resetter).Reset(bytes.NewReader(nil), nil) // keeps no reference to b
		pool.Put(zr)
	}()
	return read(zr)
}

// deflateJSON returns the JSON of v, deflated.
func deflateJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	err := deflateTo(&jsonWriters, &buf, func(w io.Writer) error { return json.NewEncoder(w).Encode(v) })
	if err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// inflateJSON decodes deflated JSON into v.
func inflateJSON(b []byte, v any) error {
	return inflateFrom(&jsonReaders, "", b, func(r io.Reader) error {
		return json.NewDecoder(io.LimitReader(r, MaxItemSize*8)).Decode(v)
	})
}
