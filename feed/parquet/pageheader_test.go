package parquet

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"
)

// thriftPageHeader writes a page header with Thrift's own compact
// protocol writer: a version 1 or 2 data page header, with the fields
// parsePageHeader skips around it (statistics, a CRC, a list, a map, an
// unknown struct and booleans, and field ids that jump).
func thriftPageHeader(t *testing.T, v2 bool) []byte {
	t.Helper()
	ctx := context.Background()
	buf := thrift.NewTMemoryBuffer()
	p := thrift.NewTCompactProtocolConf(buf, &thrift.TConfiguration{})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	i32 := func(id int16, v int32) {
		must(p.WriteFieldBegin(ctx, "", thrift.I32, id))
		must(p.WriteI32(ctx, v))
		must(p.WriteFieldEnd(ctx))
	}
	stats := func(id int16) {
		must(p.WriteFieldBegin(ctx, "", thrift.STRUCT, id))
		must(p.WriteStructBegin(ctx, ""))
		must(p.WriteFieldBegin(ctx, "", thrift.STRING, 1))
		must(p.WriteBinary(ctx, []byte("max value bytes")))
		must(p.WriteFieldEnd(ctx))
		must(p.WriteFieldBegin(ctx, "", thrift.I64, 3))
		must(p.WriteI64(ctx, 0))
		must(p.WriteFieldEnd(ctx))
		must(p.WriteFieldBegin(ctx, "", thrift.BOOL, 7))
		must(p.WriteBool(ctx, true))
		must(p.WriteFieldEnd(ctx))
		must(p.WriteFieldStop(ctx))
		must(p.WriteStructEnd(ctx))
		must(p.WriteFieldEnd(ctx))
	}
	must(p.WriteStructBegin(ctx, "PageHeader"))
	typ := int32(pageData)
	if v2 {
		typ = pageDataV2
	}
	i32(1, typ)
	i32(2, 5000)
	i32(3, 1234)
	i32(4, -77) // crc
	if !v2 {
		must(p.WriteFieldBegin(ctx, "", thrift.STRUCT, 5))
		must(p.WriteStructBegin(ctx, ""))
		i32(1, 1000)
		i32(2, 0) // PLAIN
		i32(3, 3) // RLE
		i32(4, 3)
		stats(5)
		must(p.WriteFieldStop(ctx))
		must(p.WriteStructEnd(ctx))
		must(p.WriteFieldEnd(ctx))
	} else {
		must(p.WriteFieldBegin(ctx, "", thrift.STRUCT, 8))
		must(p.WriteStructBegin(ctx, ""))
		i32(1, 1000)
		i32(2, 10)
		i32(3, 1000)
		i32(4, 0)
		i32(5, 130)
		i32(6, 0)
		must(p.WriteFieldBegin(ctx, "", thrift.BOOL, 7))
		must(p.WriteBool(ctx, false))
		must(p.WriteFieldEnd(ctx))
		stats(8)
		must(p.WriteFieldStop(ctx))
		must(p.WriteStructEnd(ctx))
		must(p.WriteFieldEnd(ctx))
	}
	// Fields a later format version might add, far ahead.
	must(p.WriteFieldBegin(ctx, "", thrift.LIST, 40))
	must(p.WriteListBegin(ctx, thrift.BOOL, 20))
	for i := 0; i < 20; i++ {
		must(p.WriteBool(ctx, i%3 == 0))
	}
	must(p.WriteListEnd(ctx))
	must(p.WriteFieldEnd(ctx))
	must(p.WriteFieldBegin(ctx, "", thrift.MAP, 41))
	must(p.WriteMapBegin(ctx, thrift.STRING, thrift.DOUBLE, 2))
	for _, k := range []string{"a", "bb"} {
		must(p.WriteString(ctx, k))
		must(p.WriteDouble(ctx, 1.5))
	}
	must(p.WriteMapEnd(ctx))
	must(p.WriteFieldEnd(ctx))
	must(p.WriteFieldStop(ctx))
	must(p.WriteStructEnd(ctx))
	must(p.Flush(ctx))
	return buf.Bytes()
}

// TestParsePageHeader parses headers Thrift's writer wrote, with the
// fields it skips, and every prefix of them as cut short.
func TestParsePageHeader(t *testing.T) {
	for _, v2 := range []bool{false, true} {
		b := thriftPageHeader(t, v2)
		body := append(append([]byte(nil), b...), 0xde, 0xad) // the page's first bytes follow
		h, n, err := parsePageHeader(body)
		if err != nil {
			t.Fatalf("v2=%v: %v", v2, err)
		}
		if n != len(b) {
			t.Errorf("v2=%v: header of %d bytes parsed as %d", v2, len(b), n)
		}
		want := pageHeader{typ: pageData, uncompressedSize: 5000, compressedSize: 1234, numValues: 1000, encoding: 0, defEncoding: 3, compressed: true}
		if v2 {
			want = pageHeader{typ: pageDataV2, uncompressedSize: 5000, compressedSize: 1234, numValues: 1000, defLen: 130, compressed: false}
		}
		if h != want {
			t.Errorf("v2=%v: parsed %+v, want %+v", v2, h, want)
		}
		for cut := 0; cut < len(b); cut++ {
			if _, _, err := parsePageHeader(b[:cut]); err != errShortHeader {
				t.Fatalf("v2=%v: %d of %d bytes: %v, want %v", v2, cut, len(b), err, errShortHeader)
			}
		}
	}
}

// TestParsePageHeaderDamaged feeds the parser damaged headers: each must
// come back as an error (or a header), never a panic or a hang.
func TestParsePageHeaderDamaged(t *testing.T) {
	good := thriftPageHeader(t, true)
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 20000; i++ {
		b := append([]byte(nil), good...)
		for k := rng.IntN(4) + 1; k > 0; k-- {
			b[rng.IntN(len(b))] = byte(rng.Uint32())
		}
		parsePageHeader(b)
		random := make([]byte, rng.IntN(64))
		for j := range random {
			random[j] = byte(rng.Uint32())
		}
		parsePageHeader(random)
	}
	if _, _, err := parsePageHeader([]byte{0x15, 0x00, 0x00}); err == nil {
		t.Error("a header without its sizes parsed")
	}
	deep := make([]byte, 0, 64)
	for range 40 {
		deep = append(deep, 0x9c) // field +9, a struct, again and again
	}
	if _, _, err := parsePageHeader(deep); err == nil || err == errShortHeader {
		t.Errorf("structs nested 40 deep: %v, want an error", err)
	}
}
