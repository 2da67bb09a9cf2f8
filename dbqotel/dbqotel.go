// Package dbqotel reports a dbqueue queue and its workers to OpenTelemetry:
// job counters and durations as metrics, each push and each run as a span,
// and the trace context carried inside the job's payload from the push to
// the handler, so a handler's span is a child of the span that pushed it.
//
// It takes the MeterProvider and TracerProvider to use and never reads or
// sets OpenTelemetry's global state, nor picks an exporter: the
// application wires its SDK once and hands it here. It imports only
// OpenTelemetry's API packages.
//
// Wiring is three calls, one per place jobs pass:
//
//	o, err := dbqotel.New(dbqotel.Options{MeterProvider: mp, TracerProvider: tp})
//	q, err := dbqueue.Open(ctx, dsn, dbqueue.WithPushMiddleware(o.PushMiddleware()))
//	w, err := worker.New(q, o.WorkerOptions(worker.Options{Concurrency: 10}))
//
// and, for the queue-depth gauge, o.ObserveDepth(q).
//
// # Metrics
//
// All carry the attributes dbqueue.queue and dbqueue.job.name (the name a
// handler is registered under).
//
//	dbqueue.jobs.pushed      counter   jobs written by a push (PushTx's too, committed or not)
//	dbqueue.jobs.processed   counter   jobs whose handler succeeded or discarded them (JobProcessed)
//	dbqueue.jobs.failed      counter   jobs moved to failed_jobs (JobFailed)
//	dbqueue.jobs.released    counter   jobs released to run again: ReleaseAfter, after an error or a
//	                                   timeout, or for want of a handler (JobReleased, JobReleasedAfterException)
//	dbqueue.jobs.given_back  counter   jobs handed back uncounted by a stopping worker (JobGivenBack)
//	dbqueue.job.duration     histogram seconds the handler (and the middleware inside this one) ran
//	dbqueue.job.queue_wait   histogram seconds from the job's available_at to its handler's start
//	dbqueue.queue.depth      gauge     jobs per queue and dbqueue.job.state (pending, delayed, reserved)
//	dbqueue.queue.oldest_pending gauge seconds the oldest pending job of a queue has been due
//
// The two gauges are read from the database at each collection, and only
// once ObserveDepth is called.
//
// # Traces
//
// The push middleware starts a producer span "push NAME" (or "push" for a
// push of jobs of several names) and writes its context into every pushed
// job's payload headers with the Propagator: W3C "traceparent" and
// "tracestate" by default. Laravel's workers ignore the payload's "headers"
// key. The worker middleware starts a consumer span "process NAME" for
// each run, the child of the context found in the headers; a job pushed
// without one (by Laravel, or before tracing was on) gets a root span.
// Every attempt of a job is a child of the same push span.
package dbqotel

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/dbqueue/dbqueue"
)

// ScopeName is the instrumentation scope of the meter and tracer dbqotel
// gets from the providers, so views and samplers can single it out.
const ScopeName = "github.com/dbqueue/dbqueue/dbqotel"

// Attribute keys on every metric and span.
const (
	// AttrQueue is the job's queue.
	AttrQueue = attribute.Key("dbqueue.queue")
	// AttrJobName is the name the job's handler is registered under.
	AttrJobName = attribute.Key("dbqueue.job.name")
	// AttrJobState, on dbqueue.queue.depth, is pending, delayed or reserved.
	AttrJobState = attribute.Key("dbqueue.job.state")
)

// Options say where dbqotel reports. Every field is optional; a nil
// provider turns that signal off at no cost beyond a no-op call.
type Options struct {
	// MeterProvider gets the metrics. Nil: none are recorded.
	MeterProvider metric.MeterProvider
	// TracerProvider gets the spans. Nil: none are started, and no trace
	// context is written into payloads.
	TracerProvider trace.TracerProvider
	// Propagator writes the push's trace context into the payload headers
	// and reads it back in the worker. Default: propagation.TraceContext
	// (W3C traceparent and tracestate), which Laravel's own tracing
	// packages can read too.
	Propagator propagation.TextMapPropagator
	// DefaultQueue names, in dbqueue.jobs.pushed, the queue of jobs pushed
	// with no NewJob.Queue: set it to what the queue was opened with
	// (dbqueue.WithDefaultQueue), since a push middleware is not told.
	// Default: dbqueue.DefaultQueue.
	DefaultQueue string
	// DepthTimeout bounds each read of the depth gauges, so a slow or
	// unreachable database never holds a metrics collection longer.
	// Default 5s.
	DepthTimeout time.Duration
}

// Instrumentation holds the instruments dbqotel records to. Make one with
// New and share it between the queue and its workers; it is safe for
// concurrent use.
type Instrumentation struct {
	opts    Options
	meter   metric.Meter
	tracer  trace.Tracer
	prop    propagation.TextMapPropagator
	tracing bool

	pushed, processed, failed, released, givenBack metric.Int64Counter
	duration, wait                                 metric.Float64Histogram
	depth                                          metric.Int64ObservableGauge
	oldest                                         metric.Float64ObservableGauge

	attrs attrCache
}

// durationBuckets are the histogram bounds, in seconds: OpenTelemetry's
// advice for durations, stretched to an hour for jobs that wait or run long.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60, 300, 900, 3600}

// New makes the instruments. It fails only when the MeterProvider refuses
// one (an SDK view with an invalid name, say).
func New(opts Options) (*Instrumentation, error) {
	if opts.MeterProvider == nil {
		opts.MeterProvider = metricnoop.NewMeterProvider()
	}
	i := &Instrumentation{opts: opts, prop: opts.Propagator, tracing: opts.TracerProvider != nil}
	if opts.TracerProvider == nil {
		opts.TracerProvider = tracenoop.NewTracerProvider()
	}
	if i.prop == nil {
		i.prop = propagation.TraceContext{}
	}
	if i.opts.DefaultQueue == "" {
		i.opts.DefaultQueue = dbqueue.DefaultQueue
	}
	if i.opts.DepthTimeout <= 0 {
		i.opts.DepthTimeout = 5 * time.Second
	}
	i.meter = opts.MeterProvider.Meter(ScopeName)
	i.tracer = opts.TracerProvider.Tracer(ScopeName)

	m := i.meter
	var errs []error
	counter := func(name, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit("{job}"))
		errs = append(errs, err)
		return c
	}
	seconds := func(name, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithDescription(desc), metric.WithUnit("s"),
			metric.WithExplicitBucketBoundaries(durationBuckets...))
		errs = append(errs, err)
		return h
	}
	i.pushed = counter("dbqueue.jobs.pushed", "Jobs written to the queue by a push.")
	i.processed = counter("dbqueue.jobs.processed", "Jobs whose handler succeeded or discarded them.")
	i.failed = counter("dbqueue.jobs.failed", "Jobs moved to failed_jobs.")
	i.released = counter("dbqueue.jobs.released", "Jobs released to run again later.")
	i.givenBack = counter("dbqueue.jobs.given_back", "Jobs handed back, their attempt uncounted, by a stopping worker.")
	i.duration = seconds("dbqueue.job.duration", "How long a job's handler ran.")
	i.wait = seconds("dbqueue.job.queue_wait", "How long a job waited from its available_at to its handler's start.")
	var err error
	i.depth, err = m.Int64ObservableGauge("dbqueue.queue.depth",
		metric.WithDescription("Jobs in a queue, by state."), metric.WithUnit("{job}"))
	errs = append(errs, err)
	i.oldest, err = m.Float64ObservableGauge("dbqueue.queue.oldest_pending",
		metric.WithDescription("How long the oldest pending job of a queue has been due."), metric.WithUnit("s"))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("dbqotel: make the instruments: %w", err)
	}
	return i, nil
}

// jobKey is what the per-job attributes depend on.
type jobKey struct{ queue, name string }

// kindOpts are one (queue, name)'s attributes, as the option lists the
// instruments take, made once so recording a job allocates nothing.
type kindOpts struct {
	add    []metric.AddOption
	record []metric.RecordOption
}

// attrCache keeps each (queue, name)'s kindOpts. It stops growing at
// maxCachedKinds (a producer inventing names must not grow it without
// end): past that, options are built per call.
type attrCache struct {
	mu sync.RWMutex
	m  map[jobKey]*kindOpts
}

const maxCachedKinds = 4096

func (c *attrCache) get(queue, name string) *kindOpts {
	k := jobKey{queue, name}
	c.mu.RLock()
	o, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return o
	}
	opt := metric.WithAttributeSet(attribute.NewSet(AttrQueue.String(queue), AttrJobName.String(name)))
	o = &kindOpts{add: []metric.AddOption{opt}, record: []metric.RecordOption{opt}}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[jobKey]*kindOpts)
	}
	if len(c.m) < maxCachedKinds {
		c.m[k] = o
	}
	return o
}

func (i *Instrumentation) jobAttrs(job *dbqueue.Job) *kindOpts {
	return i.attrs.get(job.Queue, job.Name())
}

// since is the seconds from t to now, never negative: the database's
// clock and this process's may disagree by a little.
func since(t time.Time) float64 {
	return max(time.Since(t).Seconds(), 0)
}
