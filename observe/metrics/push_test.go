package metrics

import (
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape reads srv's /metrics as a Prometheus server would.
func scrape(t *testing.T, srv *httptest.Server) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("/metrics is not Prometheus text: %v", err)
	}
	return families
}

// TestPushMetrics: a push endpoint's totals show on /metrics as they are
// at each scrape, every refusal reason present even at zero.
func TestPushMetrics(t *testing.T) {
	reg := NewRegistry()
	var rows atomic.Int64
	reasons := []string{"auth", "schema", "busy", "ended"}
	if err := RegisterPush(reg, reasons, func() Push {
		return Push{Rows: rows.Load(), Batches: 3, Bytes: 4096, Producers: 2, BufferedBytes: 1024,
			BackpressureSeconds: 1.5, Refused: map[string]int64{"auth": 1, "schema": 2}}
	}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(Handler(reg))
	defer srv.Close()
	for _, want := range []int64{100, 250} {
		rows.Store(want)
		families := scrape(t, srv)
		value := func(name string, labels map[string]string) float64 {
			t.Helper()
			f := families[name]
			if f == nil {
				t.Fatalf("%s missing", name)
			}
		next:
			for _, m := range f.GetMetric() {
				for _, lp := range m.GetLabel() {
					if labels[lp.GetName()] != lp.GetValue() {
						continue next
					}
				}
				if f.GetType() == dto.MetricType_COUNTER {
					return m.GetCounter().GetValue()
				}
				return m.GetGauge().GetValue()
			}
			t.Fatalf("%s has no series %v", name, labels)
			return 0
		}
		for _, c := range []struct {
			name   string
			labels map[string]string
			want   float64
		}{
			{"spindle_push_rows_total", nil, float64(want)},
			{"spindle_push_batches_total", nil, 3},
			{"spindle_push_bytes_total", nil, 4096},
			{"spindle_push_producers", nil, 2},
			{"spindle_push_buffered_bytes", nil, 1024},
			{"spindle_push_backpressure_wait_seconds_total", nil, 1.5},
			{"spindle_push_refused_streams_total", map[string]string{"reason": "auth"}, 1},
			{"spindle_push_refused_streams_total", map[string]string{"reason": "schema"}, 2},
			{"spindle_push_refused_streams_total", map[string]string{"reason": "busy"}, 0},
			{"spindle_push_refused_streams_total", map[string]string{"reason": "ended"}, 0},
		} {
			if got := value(c.name, c.labels); got != c.want {
				t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
			}
		}
		checkConventions(t, families)
	}
}

// TestPushNamedProducers: each named producer has its own series, up to
// namedProducerSeries of them in the order they first pushed; the rest
// are summed under producer="(others)".
func TestPushNamedProducers(t *testing.T) {
	reg := NewRegistry()
	named := make([]NamedProducer, namedProducerSeries+2)
	for i := range named {
		named[i] = NamedProducer{Name: fmt.Sprintf("etl/part-%d", i), Rows: int64(10 * (i + 1)), Batches: int64(i + 1), Open: i%2 == 0}
	}
	if err := RegisterPush(reg, nil, func() Push { return Push{Named: named} }); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(Handler(reg))
	defer srv.Close()
	families := scrape(t, srv)
	series := func(name string) map[string]float64 {
		t.Helper()
		out := map[string]float64{}
		for _, m := range families[name].GetMetric() {
			v := m.GetGauge().GetValue()
			if m.GetCounter() != nil {
				v = m.GetCounter().GetValue()
			}
			out[m.GetLabel()[0].GetValue()] = v
		}
		return out
	}
	rows, batches, open := series("spindle_push_producer_rows_total"), series("spindle_push_producer_batches_total"), series("spindle_push_producer_streams_open")
	for _, s := range []map[string]float64{rows, batches, open} {
		if len(s) != namedProducerSeries+1 {
			t.Fatalf("%d producer series, want %d and %q", len(s), namedProducerSeries, othersLabel)
		}
	}
	if rows["etl/part-0"] != 10 || batches["etl/part-0"] != 1 || open["etl/part-0"] != 1 || open["etl/part-1"] != 0 {
		t.Errorf("etl/part-0: rows %v batches %v open %v; etl/part-1 open %v", rows["etl/part-0"], batches["etl/part-0"], open["etl/part-0"], open["etl/part-1"])
	}
	// The last two, 101st and 102nd: rows 1010 and 1020, batches 101 and
	// 102, the 101st open (index 100 is even).
	if rows[othersLabel] != 2030 || batches[othersLabel] != 203 || open[othersLabel] != 1 {
		t.Errorf("others: rows %v batches %v open %v, want 2030, 203, 1", rows[othersLabel], batches[othersLabel], open[othersLabel])
	}
	if _, ok := rows["etl/part-100"]; ok {
		t.Error("the 101st producer has a series of its own")
	}
	checkConventions(t, families)
}
