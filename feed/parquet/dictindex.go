package parquet

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// dictIndices decodes the dictionary indices of a data page encoded
// RLE_DICTIONARY (or PLAIN_DICTIONARY, the same bytes): a byte giving the
// indices' bit width, then runs of the RLE/bit-packed hybrid, each a
// varint header followed either by one value repeated (even header) or by
// groups of eight values packed least significant bit first (odd).
type dictIndices struct {
	data  []byte // the runs not yet started
	width uint   // bits per index, 0 to 32

	repeat     int    // values left in the current repeated run
	value      uint32 // its value
	packedLeft int    // values left in the current bit-packed run
	packed     []byte // its bytes
	bit        uint   // the next value's first bit in packed
}

// reset starts on a page's indices, b (from the bit width byte on).
func (d *dictIndices) reset(b []byte) error {
	if len(b) < 1 {
		return fmt.Errorf("dictionary indices without their bit width")
	}
	if b[0] > 32 {
		return fmt.Errorf("dictionary indices of %d bits", b[0])
	}
	*d = dictIndices{data: b[1:], width: uint(b[0])}
	return nil
}

// next decodes len(out) indices into out.
func (d *dictIndices) next(out []uint32) error {
	for len(out) > 0 {
		switch {
		case d.repeat > 0:
			n := min(d.repeat, len(out))
			v := d.value
			for i := range out[:n] {
				out[i] = v
			}
			d.repeat -= n
			out = out[n:]
		case d.packedLeft > 0:
			n := min(d.packedLeft, len(out))
			d.unpack(out[:n])
			d.packedLeft -= n
			out = out[n:]
		default:
			if err := d.nextRun(); err != nil {
				return err
			}
		}
	}
	return nil
}

// nextRun reads the next run's header (and a repeated run's value).
func (d *dictIndices) nextRun() error {
	repeated, count, v, rest, err := hybridRun(d.data, d.width)
	switch {
	case errors.Is(err, errRunHeader):
		return fmt.Errorf("dictionary indices end before the page's values do")
	case err != nil:
		return fmt.Errorf("a damaged run of dictionary indices")
	}
	d.data = rest
	if repeated {
		if count == 0 || count > 1<<31 {
			return fmt.Errorf("a damaged run of dictionary indices")
		}
		d.repeat, d.value = int(count), v
		return nil
	}
	groups := count
	if groups == 0 || groups > 1<<28 {
		return fmt.Errorf("a damaged run of dictionary indices")
	}
	size := int(groups) * int(d.width)
	if size > len(d.data) {
		// The last run of a page may stop short of its last group.
		size = len(d.data)
	}
	if d.width == 0 {
		d.repeat, d.value = int(groups)*8, 0
		return nil
	}
	d.packed, d.data = d.data[:size], d.data[size:]
	d.packedLeft = min(int(groups)*8, size*8/int(d.width))
	d.bit = 0
	if d.packedLeft == 0 {
		return fmt.Errorf("a damaged run of dictionary indices")
	}
	return nil
}

// Errors of hybridRun.
var (
	errRunHeader = errors.New("a bad run header")
	errRunValue  = errors.New("a run without its value")
)

// hybridRun reads the run at the start of data in Parquet's RLE/bit-packed
// hybrid encoding of width-bit values (definition levels, dictionary
// indices): its header and, for a repeated run, its value. A repeated run
// is count copies of value; a bit-packed run, count groups of eight values
// in the count*width bytes that follow, least significant bit first. rest
// is what follows the header and the value.
func hybridRun(data []byte, width uint) (repeated bool, count uint64, value uint32, rest []byte, err error) {
	h, n := binary.Uvarint(data)
	if n <= 0 {
		return false, 0, 0, nil, errRunHeader
	}
	data = data[n:]
	if h&1 == 1 {
		return false, h >> 1, 0, data, nil
	}
	size := int(width+7) / 8
	if len(data) < size {
		return false, 0, 0, nil, errRunValue
	}
	for i := range size {
		value |= uint32(data[i]) << (8 * i)
	}
	return true, h >> 1, value, data[size:], nil
}

// unpack decodes len(out) values of the current bit-packed run.
func (d *dictIndices) unpack(out []uint32) {
	w := d.width
	mask := uint64(1)<<w - 1
	p := d.packed
	bit := d.bit
	i := 0
	// Eight bytes at a time hold any value (32 bits at most, from any of
	// a byte's eight bit offsets) while eight remain.
	for ; i < len(out) && int(bit>>3)+8 <= len(p); i++ {
		out[i] = uint32(binary.LittleEndian.Uint64(p[bit>>3:]) >> (bit & 7) & mask)
		bit += w
	}
	for ; i < len(out); i++ {
		var word [8]byte
		copy(word[:], p[bit>>3:])
		out[i] = uint32(binary.LittleEndian.Uint64(word[:]) >> (bit & 7) & mask)
		bit += w
	}
	d.bit = bit
}
