package dynamo

import (
	"bytes"
	"compress/flate"
	"encoding/json"
	"io"
)

// Compressors are reused: a new flate writer allocates about 1 MB (its
// window and hash chains) and a new reader about 40 KB, and a write of a
// run deflates its row and its events. With a new writer each time the
// store's own client-side work was 17.7 ms and 6.7 MB of allocations per
// suspend, decide, claim and load (BenchmarkStoreOverhead).
var (
	rowWriters  = make(freeList[*flate.Writer], spareCompressors) // primed with rowDict
	jsonWriters = make(freeList[*flate.Writer], spareCompressors)
	rowReaders  = make(freeList[io.ReadCloser], spareCompressors) // primed with rowDict
	jsonReaders = make(freeList[io.ReadCloser], spareCompressors)
)

// spareCompressors bounds the idle compressors of each kind kept (at most
// 4 MB of writers per kind, only after that many writes ran at once).
const spareCompressors = 4

// freeList keeps up to its capacity of idle values. Unlike sync.Pool it
// keeps them across garbage collections and does not, under the race
// detector, drop a quarter of what is put back: each drop cost a new 1 MB
// compressor, 36% of the CPU of the DynamoDB suites under -race.
type freeList[T any] chan T

func (f freeList[T]) get() (v T, ok bool) {
	select {
	case v = <-f:
		return v, true
	default:
		return v, false
	}
}

func (f freeList[T]) put(v T) {
	select {
	case f <- v:
	default:
	}
}

// deflateTo writes what write writes into buf, deflated (with dict, which
// is rowDict for rowWriters and empty for jsonWriters).
func deflateTo(spare freeList[*flate.Writer], dict string, buf *bytes.Buffer, write func(io.Writer) error) error {
	zw, ok := spare.get()
	if ok {
		zw.Reset(buf)
	} else {
		var err error
		if zw, err = flate.NewWriterDict(buf, flate.BestCompression, []byte(dict)); err != nil {
			return err
		}
	}
	if err := write(zw); err != nil {
		return err
	}
	err := zw.Close()
	zw.Reset(io.Discard) // keeps no reference to buf
	spare.put(zw)
	return err
}

// inflateFrom calls read with a reader of the deflated b (with dict, as
// deflateTo).
func inflateFrom(spare freeList[io.ReadCloser], dict string, b []byte, read func(io.Reader) error) error {
	zr, ok := spare.get()
	if !ok {
		zr = flate.NewReaderDict(bytes.NewReader(b), []byte(dict))
	} else if err := zr.(flate.Resetter).Reset(bytes.NewReader(b), []byte(dict)); err != nil {
		return err
	}
	err := read(zr)
	if zr.(flate.Resetter).Reset(bytes.NewReader(nil), nil) == nil { // keeps no reference to b
		spare.put(zr)
	}
	return err
}

// deflateJSON returns the JSON of v, deflated.
func deflateJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	err := deflateTo(jsonWriters, "", &buf, func(w io.Writer) error { return json.NewEncoder(w).Encode(v) })
	if err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// inflateJSON decodes deflated JSON into v.
func inflateJSON(b []byte, v any) error {
	return inflateFrom(jsonReaders, "", b, func(r io.Reader) error {
		return json.NewDecoder(io.LimitReader(r, MaxItemSize*8)).Decode(v)
	})
}
