package feed

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/testbed/flighttest"
)

// TestCheckIPCMessage: arrow-go's own schema message passes; one whose
// field vector claims more fields than its bytes could hold is refused
// before arrow-go would allocate them, as is a message claiming more
// bytes than follow.
func TestCheckIPCMessage(t *testing.T) {
	schema := flight.SerializeSchema(flighttest.NameSchema, memory.DefaultAllocator)
	if err := checkEncapsulated(schema); err != nil {
		t.Fatalf("arrow-go's schema message: %v", err)
	}
	if err := CheckIPCMessage(flighttest.HugeSchemaMessage(1)); err != nil {
		t.Fatalf("a schema of one field: %v", err)
	}
	for _, n := range []uint32{1 << 31, 1<<31 - 1, 1 << 20} {
		if err := CheckIPCMessage(flighttest.HugeSchemaMessage(n)); !errors.Is(err, errBadIPC) {
			t.Errorf("a schema message claiming %d fields: %v, want refused", n, err)
		}
	}
	if err := checkEncapsulated(flighttest.Encapsulated(flighttest.HugeSchemaMessage(1<<31 - 1))); !errors.Is(err, errBadIPC) {
		t.Errorf("the same as a FlightInfo's schema: %v, want refused", err)
	}
	if err := checkEncapsulated([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}); !errors.Is(err, errBadIPC) {
		t.Errorf("a message claiming 2 GiB: %v, want refused", err)
	}
}

// TestPlanIPCFileHugeSchema: an Arrow IPC file whose footer's schema
// claims two billion fields is an input error naming the file; arrow-go
// would have died trying to allocate them.
func TestPlanIPCFileHugeSchema(t *testing.T) {
	b := arrowFileBytes(t)
	flen := int(binary.LittleEndian.Uint32(b[len(b)-10:]))
	footer := b[len(b)-10-flen : len(b)-10]
	root, err := fbRoot(footer)
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := root.tableField(1)
	if err != nil {
		t.Fatal(err)
	}
	start, _, err := s.vectorField(1, 4)
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint32(footer[start-4:], 1<<31-1)
	path := filepath.Join(t.TempDir(), "huge.arrow")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	_, err = Plan(context.Background(), res, PlanRequest{Inputs: []string{path}, Ranks: 1})
	if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "huge.arrow") {
		t.Fatalf("got %v, want an input error naming huge.arrow", err)
	}
	if !bytes.Contains([]byte(err.Error()), []byte("fields")) {
		t.Fatalf("%v does not say what is wrong", err)
	}
}

// TestFlightHugeSchema: a Flight service whose FlightInfo's schema claims
// two billion fields is an input error naming the input at planning.
func TestFlightHugeSchema(t *testing.T) {
	srv := flighttest.Start(t, "", map[string]flighttest.Flight{
		"huge": {RawSchema: flighttest.Encapsulated(flighttest.HugeSchemaMessage(1<<31 - 1))},
	})
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	_, err := Plan(ctx, res, PlanRequest{Inputs: []string{srv.URI("huge")}, Ranks: 1})
	if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "huge") || !strings.Contains(err.Error(), "fields") {
		t.Fatalf("got %v, want an input error naming the flight and saying what is wrong", err)
	}
}
