// Package inflate decodes DEFLATE (RFC 1951) and single-member gzip
// (RFC 1952) data held whole in memory into a buffer of its known decoded
// size, as Parquet's gzip pages are: it reads the input 64 bits at a time
// and finds each code with one table lookup, several times faster than a
// streaming decoder. The feed's Parquet gzip codec puts it in front of
// arrow-go's.
package inflate
