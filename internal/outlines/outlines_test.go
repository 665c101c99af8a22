package outlines

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestRead(t *testing.T) {
	cases := []struct {
		name string
		in   string
		max  int
		want []string
	}{
		{"plain", "one\ntwo\n", 0, []string{"one", "two"}},
		{"no final newline", "one\ntwo", 0, []string{"one", "two"}},
		{"crlf is one end", "one\r\ntwo\r\n", 0, []string{"one", "two"}},
		{"lone cr ends a line", "10%\r20%\r30%\n", 0, []string{"10%", "20%", "30%"}},
		{"empty lines kept", "a\n\nb\n", 0, []string{"a", "", "b"}},
		{"cut long line", "abcdefghij\nok\n", 4, []string{"abcd ... [line cut: 6 more bytes dropped]", "ok"}},
		{"cut at end", "abcdefghij", 4, []string{"abcd ... [line cut: 6 more bytes dropped]"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []io.Reader{strings.NewReader(tc.in), iotest.OneByteReader(strings.NewReader(tc.in))} {
				var got []string
				if err := Read(r, tc.max, func(l []byte) { got = append(got, string(l)) }); err != nil {
					t.Fatal(err)
				}
				if strings.Join(got, "|") != strings.Join(tc.want, "|") {
					t.Fatalf("got %q, want %q", got, tc.want)
				}
			}
		})
	}
}

// TestReadDrainsHugeLine checks that a line far longer than the limit is
// read to its end (the writer is never left blocked) in bounded memory.
func TestReadDrainsHugeLine(t *testing.T) {
	pr, pw := io.Pipe()
	go func() {
		chunk := []byte(strings.Repeat("x", 1<<20))
		for i := 0; i < 8; i++ { // 8 MiB without a line end
			if _, err := pw.Write(chunk); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		_, _ = pw.Write([]byte("\nafter\n"))
		pw.Close()
	}()
	var got []string
	if err := Read(pr, 100, func(l []byte) { got = append(got, string(l)) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1] != "after" || !strings.Contains(got[0], "8388508 more bytes dropped") {
		t.Fatalf("got %d lines: %.200q", len(got), got)
	}
}

func TestReadError(t *testing.T) {
	boom := errors.New("boom")
	var got []string
	err := Read(io.MultiReader(strings.NewReader("part"), iotest.ErrReader(boom)), 0, func(l []byte) { got = append(got, string(l)) })
	if !errors.Is(err, boom) || len(got) != 1 || got[0] != "part" {
		t.Fatalf("err %v, lines %q", err, got)
	}
}
