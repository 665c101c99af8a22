package metrics

import (
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
