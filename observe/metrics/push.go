package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Push is what a job's push endpoint (a flight-put: input) has taken so
// far, over all its producers.
type Push struct {
	// Rows, Batches and Bytes are what producers pushed and the endpoint
	// accepted.
	Rows, Batches, Bytes int64
	// Producers is the producers' streams open now.
	Producers int64
	// BufferedBytes is the pushed data the driver holds now.
	BufferedBytes int64
	// BackpressureSeconds is the time producers waited for room, all
	// together.
	BackpressureSeconds float64
	// Refused counts refused streams by reason.
	Refused map[string]int64
	// Named is each producer that names its streams, in the order they
	// first pushed.
	Named []NamedProducer
}

// NamedProducer is what the endpoint took from one named producer.
type NamedProducer struct {
	Name          string
	Rows, Batches int64
	Open          bool // it has a stream open now
}

// namedProducerSeries bounds the producers that get series of their own:
// those past it, in the order they first pushed, are summed under
// producer="(others)", so a job pushed into by thousands of short-lived
// producers does not give Prometheus thousands of series. The order is
// fixed, so the sum only grows, as a counter must.
const namedProducerSeries = 100

// othersLabel is the producer label of the producers past
// namedProducerSeries.
const othersLabel = "(others)"

// pushCollector reads a push endpoint's totals at each scrape, so the
// endpoint keeps plain counters and /metrics shows them as they are.
type pushCollector struct {
	read    func() Push
	reasons []string

	rows, batches, bytes, producers, buffered, wait, refused *prometheus.Desc
	producerRows, producerBatches, producerOpen              *prometheus.Desc
}

var _ prometheus.Collector = (*pushCollector)(nil)

// RegisterPush registers the metrics of a job's push endpoint in reg,
// read from read at each scrape; reasons are every reason a stream can be
// refused for, each shown even at zero.
func RegisterPush(reg prometheus.Registerer, reasons []string, read func() Push) error {
	c := &pushCollector{read: read, reasons: reasons,
		rows:      prometheus.NewDesc("spindle_push_rows_total", "Rows producers pushed into the job's flight-put: endpoint and the driver accepted.", nil, nil),
		batches:   prometheus.NewDesc("spindle_push_batches_total", "Record batches producers pushed and the driver accepted.", nil, nil),
		bytes:     prometheus.NewDesc("spindle_push_bytes_total", "Bytes (Arrow buffers) of the batches producers pushed and the driver accepted.", nil, nil),
		producers: prometheus.NewDesc("spindle_push_producers", "Producers' DoPut streams open now.", nil, nil),
		buffered:  prometheus.NewDesc("spindle_push_buffered_bytes", "Pushed data the driver holds now, dealt and waiting for its rank or waiting to be dealt (at most spindle.flight.put.bufferMemory and a round of batches).", nil, nil),
		wait:      prometheus.NewDesc("spindle_push_backpressure_wait_seconds_total", "Time producers' batches waited for the driver to have room (training slower than the producers), all producers together.", nil, nil),
		refused:   prometheus.NewDesc("spindle_push_refused_streams_total", "Producers' streams refused, by reason: auth (no valid token), schema (mismatch with the job's), busy (the producer's name has a stream open), ended (after the end of input or past its declared rows).", []string{"reason"}, nil),
		producerRows: prometheus.NewDesc("spindle_push_producer_rows_total",
			"Rows the driver accepted from each producer that names its streams (a path descriptor); past the first 100 producers, summed as producer=\"(others)\".", []string{"producer"}, nil),
		producerBatches: prometheus.NewDesc("spindle_push_producer_batches_total",
			"Record batches the driver accepted from each named producer (as spindle_push_producer_rows_total).", []string{"producer"}, nil),
		producerOpen: prometheus.NewDesc("spindle_push_producer_streams_open",
			"Streams each named producer has open now: 0 or 1 (one name, one stream); producer=\"(others)\" counts those past the first 100.", []string{"producer"}, nil),
	}
	return reg.Register(c)
}

// Describe sends the metrics' descriptions.
func (c *pushCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.rows, c.batches, c.bytes, c.producers, c.buffered, c.wait, c.refused,
		c.producerRows, c.producerBatches, c.producerOpen} {
		ch <- d
	}
}

// Collect sends the endpoint's totals now.
func (c *pushCollector) Collect(ch chan<- prometheus.Metric) {
	p := c.read()
	ch <- prometheus.MustNewConstMetric(c.rows, prometheus.CounterValue, float64(p.Rows))
	ch <- prometheus.MustNewConstMetric(c.batches, prometheus.CounterValue, float64(p.Batches))
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(p.Bytes))
	ch <- prometheus.MustNewConstMetric(c.producers, prometheus.GaugeValue, float64(p.Producers))
	ch <- prometheus.MustNewConstMetric(c.buffered, prometheus.GaugeValue, float64(p.BufferedBytes))
	ch <- prometheus.MustNewConstMetric(c.wait, prometheus.CounterValue, p.BackpressureSeconds)
	for _, r := range c.reasons {
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(p.Refused[r]), r)
	}
	var others NamedProducer
	othersOpen := 0
	for i, np := range p.Named {
		if i >= namedProducerSeries {
			others.Rows += np.Rows
			others.Batches += np.Batches
			if np.Open {
				othersOpen++
			}
			continue
		}
		c.producer(ch, np.Name, np.Rows, np.Batches, boolCount(np.Open))
	}
	if len(p.Named) > namedProducerSeries {
		c.producer(ch, othersLabel, others.Rows, others.Batches, othersOpen)
	}
}

// producer sends one producer label's series.
func (c *pushCollector) producer(ch chan<- prometheus.Metric, name string, rows, batches int64, open int) {
	ch <- prometheus.MustNewConstMetric(c.producerRows, prometheus.CounterValue, float64(rows), name)
	ch <- prometheus.MustNewConstMetric(c.producerBatches, prometheus.CounterValue, float64(batches), name)
	ch <- prometheus.MustNewConstMetric(c.producerOpen, prometheus.GaugeValue, float64(open), name)
}

func boolCount(b bool) int {
	if b {
		return 1
	}
	return 0
}
