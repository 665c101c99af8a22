package inflate

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/bits"
	"slices"
	"sync"
)

// Inflate decodes DEFLATE data (RFC 1951) held whole in memory into out,
// which must be exactly the decoded size, and returns how many bytes of
// in the stream took. It is written for Parquet's gzip pages, where the
// page header gives the decoded size: the input is read 64 bits at a
// time, and each code is found with one lookup in a table of its first
// bits (and a second for the few longer codes), in the manner of
// libdeflate. klauspost/compress's inflate, which arrow-go uses, reads
// the input a byte at a time and spends four fifths of the decode time
// of a gzip-compressed Parquet file.
//
// Errors say only that the data is not valid DEFLATE of that size;
// a caller with another decoder (feed's Parquet gzip codec) lets it
// report the real problem.
func Inflate(out, in []byte) (int, error) {
	d := inflaters.Get().(*inflater)
	defer inflaters.Put(d)
	d.in, d.pos, d.bitbuf, d.nbits, d.out, d.op = in, 0, 0, 0, out, 0
	defer func() { d.in, d.out = nil, nil }()
	if err := d.run(); err != nil {
		return 0, err
	}
	return d.consumed()
}

// inflaters keeps inflaters, whose tables are reused from call to call.
var inflaters = sync.Pool{New: func() any { return new(inflater) }}

var (
	errInflate      = errors.New("inflate: invalid deflate data")
	errInflateShort = errors.New("inflate: data decodes to a different size")
)

// A table entry: bits 0-4 how many bits the entry's code takes (for a
// link: the primary table's bits), bits 5-8 the extra bits that follow a
// length or distance code (for a link: the subtable's bits), bits 9-11
// the kind, bits 16-31 the value (a literal byte, a length or distance
// base, or a link's subtable offset). A zero entry is an invalid code.
const (
	kindShift          = 9
	kindLiteral uint32 = 1 << kindShift
	kindBase    uint32 = 2 << kindShift
	kindEnd     uint32 = 3 << kindShift
	kindLink    uint32 = 4 << kindShift
	kindMask    uint32 = 7 << kindShift

	litlenPrimary = 10
	distPrimary   = 8
)

var (
	lengthBase  = [29]uint32{3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258}
	lengthExtra = [29]uint32{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0}
	distBase    = [30]uint32{1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577}
	distExtra   = [30]uint32{0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13}
	// clOrder is the order of the code length code lengths in a dynamic
	// block's header.
	clOrder = [19]int{16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15}
)

func litlenEntry(sym int) uint32 {
	switch {
	case sym < 256:
		return kindLiteral | uint32(sym)<<16
	case sym == 256:
		return kindEnd
	case sym <= 285:
		return kindBase | lengthExtra[sym-257]<<5 | lengthBase[sym-257]<<16
	}
	return 0 // 286 and 287 are not valid symbols
}

func distEntry(sym int) uint32 {
	if sym < 30 {
		return kindBase | distExtra[sym]<<5 | distBase[sym]<<16
	}
	return 0 // 30 and 31 are not valid symbols
}

// huffTable finds the symbols of one canonical Huffman code.
type huffTable struct {
	bits uint     // bits of the primary table
	t    []uint32 // primary table, then the subtables

	// Scratch of build.
	count    [16]int
	next     [16]int
	codes    [288]uint16                // bit-reversed code of each long symbol
	subBits  [1 << litlenPrimary]uint8  // subtable bits of each long prefix; zero between builds
	subStart [1 << litlenPrimary]uint16 // subtable offset of each long prefix
	prefixes []uint16                   // the long prefixes
}

// build makes the table of the code with the given code lengths, whose
// symbols' entries entry gives; primary bounds the primary table's bits.
// Over-subscribed codes are an error; incomplete ones leave their unused
// codes invalid.
func (h *huffTable) build(lens []uint8, primary uint, entry func(int) uint32) error {
	h.count = [16]int{}
	maxLen := 0
	for _, l := range lens {
		h.count[l]++
		maxLen = max(maxLen, int(l))
	}
	h.count[0] = 0
	left := 1
	for l := 1; l < 16; l++ {
		left = left<<1 - h.count[l]
		if left < 0 {
			return errInflate
		}
	}
	code := 0
	for l := 1; l < 16; l++ {
		code = (code + h.count[l-1]) << 1
		h.next[l] = code
	}
	h.bits = min(primary, uint(max(maxLen, 1)))
	size := 1 << h.bits
	if cap(h.t) < size {
		h.t = make([]uint32, size, size*2)
	}
	h.t = h.t[:size]
	clear(h.t)
	long := false
	for s, l := range lens {
		if l == 0 {
			continue
		}
		r := int(bits.Reverse16(uint16(h.next[l])) >> (16 - l))
		h.next[l]++
		if uint(l) > h.bits {
			long = true
			continue
		}
		e := entry(s) | uint32(l)
		for i := r; i < size; i += 1 << l {
			h.t[i] = e
		}
	}
	if !long {
		return nil
	}
	// Codes longer than the primary table: one subtable per prefix, as
	// deep as the longest code with that prefix. First the depths.
	code = 0
	for l := 1; l < 16; l++ {
		code = (code + h.count[l-1]) << 1
		h.next[l] = code
	}
	h.prefixes = h.prefixes[:0]
	for s, l := range lens {
		if uint(l) <= h.bits {
			continue
		}
		r := int(bits.Reverse16(uint16(h.next[l])) >> (16 - l))
		h.next[l]++
		h.codes[s] = uint16(r)
		p := r & (size - 1)
		if h.subBits[p] == 0 {
			h.prefixes = append(h.prefixes, uint16(p))
		}
		h.subBits[p] = max(h.subBits[p], l-uint8(h.bits))
	}
	slices.Sort(h.prefixes) // so that tables are laid out the same way every time
	for _, p := range h.prefixes {
		sb := uint(h.subBits[p])
		off := len(h.t)
		if off+1<<sb >= 1<<16 {
			return errInflate
		}
		h.t = append(h.t, make([]uint32, 1<<sb)...)
		h.subStart[p] = uint16(off)
		h.t[p] = kindLink | uint32(sb)<<5 | uint32(h.bits) | uint32(off)<<16
	}
	for s, l := range lens {
		if uint(l) <= h.bits {
			continue
		}
		r := int(h.codes[s])
		p := r & (size - 1)
		off, sb := int(h.subStart[p]), uint(h.subBits[p])
		e := entry(s) | (uint32(l) - uint32(h.bits))
		step := 1 << (uint(l) - h.bits)
		for i := r >> h.bits; i < 1<<sb; i += step {
			h.t[off+i] = e
		}
	}
	for _, p := range h.prefixes {
		h.subBits[p] = 0
	}
	return nil
}

// inflater is the state of one inflate call.
type inflater struct {
	in     []byte
	pos    int // next input byte to load into bitbuf
	bitbuf uint64
	nbits  uint // valid bits in bitbuf
	out    []byte
	op     int

	litlen, dist, codelen huffTable
}

// fixedLitlen and fixedDist are the tables of the fixed Huffman code
// (block type 1), built once.
var fixedLitlen, fixedDist = func() (huffTable, huffTable) {
	var lens [288]uint8
	for i := range lens {
		switch {
		case i < 144:
			lens[i] = 8
		case i < 256:
			lens[i] = 9
		case i < 280:
			lens[i] = 7
		default:
			lens[i] = 8
		}
	}
	var ll, dd huffTable
	if err := ll.build(lens[:], litlenPrimary, litlenEntry); err != nil {
		panic(err)
	}
	var dl [32]uint8
	for i := range dl {
		dl[i] = 5
	}
	if err := dd.build(dl[:], distPrimary, distEntry); err != nil {
		panic(err)
	}
	return ll, dd
}()

// refill loads input until bitbuf holds at least 56 bits. Past the end of
// the input it loads zero bytes (counted in pos), which valid data never
// uses.
func (d *inflater) refill() {
	if d.pos+8 <= len(d.in) {
		d.bitbuf |= binary.LittleEndian.Uint64(d.in[d.pos:]) << d.nbits
		n := (63 - d.nbits) >> 3
		d.pos += int(n)
		d.nbits += n << 3
		return
	}
	for d.nbits <= 56 {
		if d.pos < len(d.in) {
			d.bitbuf |= uint64(d.in[d.pos]) << d.nbits
		}
		d.pos++
		d.nbits += 8
	}
}

// take consumes and returns n bits (n <= 32; nbits must cover them).
func (d *inflater) take(n uint) uint32 {
	v := uint32(d.bitbuf & (1<<n - 1))
	d.bitbuf >>= n
	d.nbits -= n
	return v
}

// decode finds the next symbol of h; nbits must be at least 15.
func (d *inflater) decode(h *huffTable) uint32 {
	e := h.t[d.bitbuf&(1<<h.bits-1)]
	if e&kindMask == kindLink {
		d.bitbuf >>= e & 31
		d.nbits -= uint(e & 31)
		e = h.t[int(e>>16)+int(d.bitbuf&(1<<((e>>5)&15)-1))]
	}
	d.bitbuf >>= e & 31
	d.nbits -= uint(e & 31)
	return e
}

func (d *inflater) run() error {
	for {
		d.refill()
		if d.pos > len(d.in)+8 {
			return errInflate
		}
		final := d.take(1)
		switch d.take(2) {
		case 0:
			if err := d.stored(); err != nil {
				return err
			}
		case 1:
			if err := d.block(&fixedLitlen, &fixedDist); err != nil {
				return err
			}
		case 2:
			if err := d.dynamic(); err != nil {
				return err
			}
			if err := d.block(&d.litlen, &d.dist); err != nil {
				return err
			}
		default:
			return errInflate
		}
		if final == 1 {
			if d.op != len(d.out) {
				return errInflateShort
			}
			return nil
		}
	}
}

// consumed returns the input bytes the stream took, once it has ended.
func (d *inflater) consumed() (int, error) {
	n := d.pos - int(d.nbits>>3)
	if n > len(d.in) {
		return 0, errInflate
	}
	return n, nil
}

func (d *inflater) stored() error {
	// Skip to a byte boundary, then give back the whole bytes loaded.
	d.take(d.nbits & 7)
	d.pos -= int(d.nbits >> 3)
	d.bitbuf, d.nbits = 0, 0
	if d.pos+4 > len(d.in) {
		return errInflate
	}
	n := int(binary.LittleEndian.Uint16(d.in[d.pos:]))
	if uint16(n) != ^binary.LittleEndian.Uint16(d.in[d.pos+2:]) {
		return errInflate
	}
	d.pos += 4
	if d.pos+n > len(d.in) || d.op+n > len(d.out) {
		return errInflateShort
	}
	d.op += copy(d.out[d.op:], d.in[d.pos:d.pos+n])
	d.pos += n
	return nil
}

func (d *inflater) dynamic() error {
	d.refill()
	nlit := int(d.take(5)) + 257
	ndist := int(d.take(5)) + 1
	nclen := int(d.take(4)) + 4
	if nlit > 286 || ndist > 30 {
		return errInflate
	}
	var clens [19]uint8
	for i := 0; i < nclen; i++ {
		if d.nbits < 3 {
			d.refill()
		}
		clens[clOrder[i]] = uint8(d.take(3))
	}
	if err := d.codelen.build(clens[:], 7, func(s int) uint32 { return kindLiteral | uint32(s)<<16 }); err != nil {
		return err
	}
	var lens [286 + 30]uint8
	for i := 0; i < nlit+ndist; {
		if d.nbits < 15+7 {
			d.refill()
			if d.pos > len(d.in)+8 {
				return errInflate
			}
		}
		e := d.decode(&d.codelen)
		if e&kindMask != kindLiteral {
			return errInflate
		}
		sym := e >> 16
		var rep int
		var val uint8
		switch {
		case sym < 16:
			lens[i] = uint8(sym)
			i++
			continue
		case sym == 16:
			if i == 0 {
				return errInflate
			}
			val, rep = lens[i-1], 3+int(d.take(2))
		case sym == 17:
			rep = 3 + int(d.take(3))
		default:
			rep = 11 + int(d.take(7))
		}
		if i+rep > nlit+ndist {
			return errInflate
		}
		for ; rep > 0; rep-- {
			lens[i] = val
			i++
		}
	}
	if lens[256] == 0 {
		return errInflate // no end of block
	}
	if err := d.litlen.build(lens[:nlit], litlenPrimary, litlenEntry); err != nil {
		return err
	}
	return d.dist.build(lens[nlit:nlit+ndist], distPrimary, distEntry)
}

// block decodes one Huffman-coded block's symbols. The bit buffer lives
// in locals here (the hot loop), written back on the way out.
func (d *inflater) block(ll, dt *huffTable) error {
	in, pos, bb, nb := d.in, d.pos, d.bitbuf, d.nbits
	out, op := d.out, d.op
	lt, lmask := ll.t, uint64(1)<<ll.bits-1
	dtab, dmask := dt.t, uint64(1)<<dt.bits-1
	save := func(err error) error {
		d.pos, d.bitbuf, d.nbits, d.op = pos, bb, nb, op
		return err
	}
	for {
		// A length and its distance take at most 15+5+15+13 bits: refill
		// below 48 (to 56 or more).
		if nb < 48 {
			if pos+8 <= len(in) {
				bb |= binary.LittleEndian.Uint64(in[pos:]) << nb
				n := (63 - nb) >> 3
				pos += int(n)
				nb += n << 3
			} else {
				d.pos, d.bitbuf, d.nbits = pos, bb, nb
				d.refill()
				pos, bb, nb = d.pos, d.bitbuf, d.nbits
				if pos > len(in)+8 {
					return save(errInflate)
				}
			}
		}
		e := lt[bb&lmask]
		if e&kindMask == kindLink {
			bb >>= e & 31
			nb -= uint(e & 31)
			e = lt[int(e>>16)+int(bb&(1<<((e>>5)&15)-1))]
		}
		bb >>= e & 31
		nb -= uint(e & 31)
		if e&kindMask == kindLiteral {
			if op >= len(out) {
				return save(errInflateShort)
			}
			out[op] = byte(e >> 16)
			op++
			// Three more literals fit in what is left: 41 bits or more after
			// the first symbol (15 bits at most), and a literal found in the
			// primary table takes at most its 10 bits. Anything else waits
			// for the refill.
			for range 3 {
				e = lt[bb&lmask]
				if e&kindMask != kindLiteral {
					break
				}
				bb >>= e & 31
				nb -= uint(e & 31)
				if op >= len(out) {
					return save(errInflateShort)
				}
				out[op] = byte(e >> 16)
				op++
			}
			continue
		}
		switch e & kindMask {
		case kindEnd:
			return save(nil)
		case kindBase:
		default:
			return save(errInflate)
		}
		x := (e >> 5) & 15
		length := int(e>>16) + int(bb&(1<<x-1))
		bb >>= x
		nb -= uint(x)
		e = dtab[bb&dmask]
		if e&kindMask == kindLink {
			bb >>= e & 31
			nb -= uint(e & 31)
			e = dtab[int(e>>16)+int(bb&(1<<((e>>5)&15)-1))]
		}
		bb >>= e & 31
		nb -= uint(e & 31)
		if e&kindMask != kindBase {
			return save(errInflate)
		}
		x = (e >> 5) & 15
		dist := int(e>>16) + int(bb&(1<<x-1))
		bb >>= x
		nb -= uint(x)
		if dist > op {
			return save(errInflate)
		}
		if op+length > len(out) {
			return save(errInflateShort)
		}
		copyMatch(out, op, dist, length)
		op += length
	}
}

// copyMatch copies the length bytes found dist back in out to out[op:];
// a match longer than its distance repeats the bytes it copies.
func copyMatch(out []byte, op, dist, length int) {
	if dist >= length {
		copy(out[op:op+length], out[op-dist:op-dist+length])
		return
	}
	for i := op; i < op+length; i++ {
		out[i] = out[i-dist]
	}
}

// Gunzip decodes a single-member gzip stream (RFC 1952) into out, which
// must be exactly its decoded size, checking its CRC and size.
func Gunzip(out, in []byte) error {
	if len(in) < 18 || in[0] != 0x1f || in[1] != 0x8b || in[2] != 8 {
		return errInflate
	}
	flg := in[3]
	if flg&0xe0 != 0 {
		return errInflate
	}
	pos := 10
	if flg&4 != 0 { // FEXTRA
		if pos+2 > len(in) {
			return errInflate
		}
		pos += 2 + int(binary.LittleEndian.Uint16(in[pos:]))
	}
	for _, f := range []byte{8, 16} { // FNAME, FCOMMENT: zero-terminated
		if flg&f == 0 {
			continue
		}
		for pos < len(in) && in[pos] != 0 {
			pos++
		}
		pos++
	}
	if flg&2 != 0 { // FHCRC
		pos += 2
	}
	if pos >= len(in) {
		return errInflate
	}
	n, err := Inflate(out, in[pos:])
	if err != nil {
		return err
	}
	pos += n
	if pos+8 != len(in) { // a truncated trailer, or more members
		return errInflate
	}
	if crc32.ChecksumIEEE(out) != binary.LittleEndian.Uint32(in[pos:]) ||
		uint32(len(out)) != binary.LittleEndian.Uint32(in[pos+4:]) {
		return errInflate
	}
	return nil
}
