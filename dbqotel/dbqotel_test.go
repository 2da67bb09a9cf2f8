package dbqotel_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/dbqotel"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/worker"
)

var bg = context.Background()

// otelSDK is an in-memory SDK: metrics read on demand, spans kept.
type otelSDK struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	inst   *dbqotel.Instrumentation
}

func newSDK(t *testing.T, opts dbqotel.Options) *otelSDK {
	t.Helper()
	s := &otelSDK{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	s.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(s.spans))
	opts.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(s.reader))
	opts.TracerProvider = s.tp
	inst, err := dbqotel.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.inst = inst
	return s
}

func (s *otelSDK) collect(t *testing.T) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := s.reader.Collect(bg, &rm); err != nil {
		t.Fatalf("collect: %v", err)
	}
	return rm
}

func findMetric(rm metricdata.ResourceMetrics, name string) (metricdata.Metrics, bool) {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m, true
			}
		}
	}
	return metricdata.Metrics{}, false
}

func matches(set attribute.Set, want map[attribute.Key]string) bool {
	for k, v := range want {
		if got, ok := set.Value(k); !ok || got.AsString() != v {
			return false
		}
	}
	return true
}

// counter sums a counter's points whose attributes include want.
func counter(rm metricdata.ResourceMetrics, name string, want map[attribute.Key]string) int64 {
	m, ok := findMetric(rm, name)
	if !ok {
		return 0
	}
	var n int64
	for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
		if matches(p.Attributes, want) {
			n += p.Value
		}
	}
	return n
}

// histogram is the count and sum of a histogram's points whose attributes
// include want.
func histogram(rm metricdata.ResourceMetrics, name string, want map[attribute.Key]string) (uint64, float64) {
	m, ok := findMetric(rm, name)
	if !ok {
		return 0, 0
	}
	var n uint64
	var sum float64
	for _, p := range m.Data.(metricdata.Histogram[float64]).DataPoints {
		if matches(p.Attributes, want) {
			n += p.Count
			sum += p.Sum
		}
	}
	return n, sum
}

func kind(name string) map[attribute.Key]string {
	return map[attribute.Key]string{dbqotel.AttrJobName: name, dbqotel.AttrQueue: dbqueue.DefaultQueue}
}

func newWorker(t *testing.T, q *dbqueue.Queue, o worker.Options) *worker.Worker {
	t.Helper()
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if o.Sleep == 0 {
		o.Sleep = 50 * time.Millisecond
	}
	if o.SignalInterval == 0 {
		o.SignalInterval = 50 * time.Millisecond
	}
	w, err := worker.New(q, o)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// runUntil runs w until done is closed, then stops it and waits for Run.
func runUntil(t *testing.T, w *worker.Worker, done <-chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()
	select {
	case <-done:
	case err := <-ran:
		t.Fatalf("Run returned early: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the jobs did not finish within 30s")
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
}

// countdown closes its channel after n calls of done.
type countdown struct {
	left atomic.Int64
	ch   chan struct{}
}

func newCountdown(n int) *countdown {
	c := &countdown{ch: make(chan struct{})}
	c.left.Store(int64(n))
	return c
}

func (c *countdown) done() {
	if c.left.Add(-1) == 0 {
		close(c.ch)
	}
}

// Every counter and histogram counts what the worker did with each kind:
// jobs that succeed, one that fails, one released by ReleaseAfter and one
// released after an error, then both run again and succeed.
func TestMetricsCountOutcomes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		s := newSDK(t, dbqotel.Options{})
		q := db.Queue(t, dbqueue.WithPushMiddleware(s.inst.PushMiddleware()))

		// Seven jobs end: ok ×3, late, again and flaky processed; boom failed.
		finished := newCountdown(7)
		w := newWorker(t, q, s.inst.WorkerOptions(worker.Options{
			Concurrency: 2,
			Events: worker.Events{
				JobProcessed: func(context.Context, *dbqueue.Job, time.Duration) { finished.done() },
				JobFailed:    func(context.Context, *dbqueue.Job, error) { finished.done() },
			},
		}))
		w.Handle("ok", func(context.Context, *dbqueue.Job) error { return nil })
		w.Handle("late", func(context.Context, *dbqueue.Job) error { return nil })
		w.Handle("boom", func(context.Context, *dbqueue.Job) error { return errors.New("boom") })
		w.Handle("again", func(_ context.Context, job *dbqueue.Job) error {
			if job.Attempts == 1 {
				return worker.ReleaseAfter(0)
			}
			return nil
		})
		w.Handle("flaky", func(_ context.Context, job *dbqueue.Job) error {
			if job.Attempts == 1 {
				return errors.New("flaky")
			}
			return nil
		})

		if _, err := q.PushMany(bg, []dbqueue.NewJob{{Name: "ok"}, {Name: "ok"}, {Name: "ok"}, {Name: "boom"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := q.PushMany(bg, []dbqueue.NewJob{
			{Name: "again", MaxTries: 2}, {Name: "flaky", MaxTries: 2},
			// Due an hour ago: its queue wait is at least that.
			{Name: "late", RunAt: time.Now().Add(-time.Hour)},
		}); err != nil {
			t.Fatal(err)
		}
		runUntil(t, w, finished.ch)

		rm := s.collect(t)
		for _, c := range []struct {
			metric, kind string
			want         int64
		}{
			{"dbqueue.jobs.pushed", "ok", 3}, {"dbqueue.jobs.pushed", "boom", 1}, {"dbqueue.jobs.pushed", "again", 1},
			{"dbqueue.jobs.processed", "ok", 3}, {"dbqueue.jobs.processed", "again", 1}, {"dbqueue.jobs.processed", "flaky", 1},
			{"dbqueue.jobs.processed", "boom", 0},
			{"dbqueue.jobs.failed", "boom", 1}, {"dbqueue.jobs.failed", "ok", 0},
			{"dbqueue.jobs.released", "again", 1}, {"dbqueue.jobs.released", "flaky", 1}, {"dbqueue.jobs.released", "ok", 0},
			{"dbqueue.jobs.given_back", "ok", 0},
		} {
			if got := counter(rm, c.metric, kind(c.kind)); got != c.want {
				t.Errorf("%s{%s} = %d, want %d", c.metric, c.kind, got, c.want)
			}
		}
		for name, runs := range map[string]uint64{"ok": 3, "boom": 1, "again": 2, "flaky": 2, "late": 1} {
			if n, sum := histogram(rm, "dbqueue.job.duration", kind(name)); n != runs || sum < 0 {
				t.Errorf("dbqueue.job.duration{%s}: %d runs summing %vs, want %d", name, n, sum, runs)
			}
			if n, _ := histogram(rm, "dbqueue.job.queue_wait", kind(name)); n != runs {
				t.Errorf("dbqueue.job.queue_wait{%s}: %d runs, want %d", name, n, runs)
			}
		}
		// available_at is in whole seconds: allow one.
		if _, sum := histogram(rm, "dbqueue.job.queue_wait", kind("late")); sum < 3599 || sum > 3600+60 {
			t.Errorf("queue wait of a job due an hour ago: %vs", sum)
		}
	})
}

// The handler's span is the child of the push's span, which is the child
// of the span the push ran in: one trace from the request to the job. The
// trace context travels in the payload headers, beside the caller's own.
func TestTraceFollowsTheJob(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		s := newSDK(t, dbqotel.Options{})
		q := db.Queue(t, dbqueue.WithPushMiddleware(s.inst.PushMiddleware()))

		ran := make(chan trace.SpanContext, 1)
		var headers dbqueue.Headers
		w := newWorker(t, q, s.inst.WorkerOptions(worker.Options{}))
		w.Handle("traced", func(ctx context.Context, job *dbqueue.Job) error {
			headers = job.Payload.Headers
			ran <- trace.SpanContextFromContext(ctx)
			return nil
		})

		ctx, request := s.tp.Tracer("test").Start(bg, "request")
		shared := map[string]string{"tenant": "acme"}
		if _, err := q.Push(ctx, dbqueue.NewJob{Name: "traced", Headers: shared}); err != nil {
			t.Fatal(err)
		}
		request.End()
		if len(shared) != 1 {
			t.Fatalf("the caller's headers map was written: %v", shared)
		}

		done := make(chan struct{})
		var inHandler trace.SpanContext
		go func() { inHandler = <-ran; close(done) }()
		runUntil(t, w, done)

		push, process := spanNamed(t, s.spans, "push traced"), spanNamed(t, s.spans, "process traced")
		reqCtx := request.SpanContext()
		switch {
		case push.Parent().SpanID() != reqCtx.SpanID() || push.SpanContext().TraceID() != reqCtx.TraceID():
			t.Errorf("push span's parent %v, want the request %v", push.Parent(), reqCtx)
		case push.SpanKind() != trace.SpanKindProducer || process.SpanKind() != trace.SpanKindConsumer:
			t.Errorf("kinds: push %v, process %v", push.SpanKind(), process.SpanKind())
		case !process.Parent().IsRemote() || process.Parent().SpanID() != push.SpanContext().SpanID():
			t.Errorf("process span's parent %v, want the push span %v, remote", process.Parent(), push.SpanContext())
		case process.SpanContext().TraceID() != reqCtx.TraceID():
			t.Errorf("process span in trace %v, want the request's %v", process.SpanContext().TraceID(), reqCtx.TraceID())
		case inHandler.SpanID() != process.SpanContext().SpanID():
			t.Errorf("the handler's context holds span %v, want the process span %v", inHandler.SpanID(), process.SpanContext().SpanID())
		case !strings.Contains(headers["traceparent"], push.SpanContext().SpanID().String()) || headers["tenant"] != "acme":
			t.Errorf("payload headers %v: want the push span's traceparent and the caller's tenant", headers)
		case process.Status().Code == codes.Error:
			t.Errorf("a successful run's span has status %v", process.Status())
		}
	})
}

func spanNamed(t *testing.T, r *tracetest.SpanRecorder, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	var names []string
	for _, s := range r.Ended() {
		if s.Name() == name {
			return s
		}
		names = append(names, s.Name())
	}
	t.Fatalf("no ended span %q among %q", name, names)
	return nil
}

// A job pushed without trace context — Laravel's own payload, or one
// whose traceparent is garbage — runs, gets a root span of its own
// (not the worker's context's), and is counted like any other.
func TestPayloadWithoutTraceContext(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		s := newSDK(t, dbqotel.Options{})
		q := db.Queue(t) // no push middleware: written as Laravel would
		laravel, err := os.ReadFile("../testdata/laravel/string_job.json")
		if err != nil {
			t.Fatal(err)
		}
		const name = `DbqInterop\Recorder@handle`
		garbage := `{"uuid":"3f1e1c1a-0000-4000-8000-000000000001","displayName":"odd","job":"odd","data":null,"headers":{"traceparent":"00-zz-not-a-trace"}}`
		insert := "INSERT INTO jobs (queue, payload, attempts, available_at, created_at) VALUES ('default', ?, 0, 0, 0)"
		db.Exec(t, insert, string(laravel))
		db.Exec(t, insert, garbage)

		finished := newCountdown(2)
		w := newWorker(t, q, s.inst.WorkerOptions(worker.Options{
			Events: worker.Events{JobProcessed: func(context.Context, *dbqueue.Job, time.Duration) { finished.done() }},
		}))
		var mu sync.Mutex
		var errs []error
		handler := func(ctx context.Context, job *dbqueue.Job) error {
			if !trace.SpanContextFromContext(ctx).IsValid() {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s ran without a span", job.Name()))
				mu.Unlock()
			}
			return nil
		}
		w.Handle(name, handler)
		w.Handle("odd", handler)
		// The worker's own context has a span: a job without trace context
		// must not become its child.
		runCtx, outer := s.tp.Tracer("test").Start(bg, "worker")
		defer outer.End()
		ctx, cancel := context.WithCancel(runCtx)
		ranErr := make(chan error, 1)
		go func() { ranErr <- w.Run(ctx) }()
		select {
		case <-finished.ch:
		case err := <-ranErr:
			t.Fatalf("Run returned early: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatal("the jobs did not finish within 30s")
		}
		cancel()
		if err := <-ranErr; err != nil {
			t.Fatal(err)
		}
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{name, "odd"} {
			sp := spanNamed(t, s.spans, "process "+n)
			if sp.Parent().IsValid() || sp.SpanContext().TraceID() == outer.SpanContext().TraceID() {
				t.Errorf("%s: parent %v in trace %v; want a root span of its own trace", n, sp.Parent(), sp.SpanContext().TraceID())
			}
			if got := counter(s.collect(t), "dbqueue.jobs.processed", kind(n)); got != 1 {
				t.Errorf("%s: processed %d, want 1", n, got)
			}
		}
	})
}

// A failed push records its error on the push span and counts nothing.
func TestFailedPushCountsNothing(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		s := newSDK(t, dbqotel.Options{})
		q := db.Queue(t, dbqueue.WithPushMiddleware(s.inst.PushMiddleware()))
		if _, err := q.Push(bg, dbqueue.NewJob{Name: "neg", Delay: -time.Second}); err == nil {
			t.Fatal("a negative delay was pushed")
		}
		if _, err := q.Push(bg, dbqueue.NewJob{Name: "fine", Queue: "other"}); err != nil {
			t.Fatal(err)
		}
		rm := s.collect(t)
		if n := counter(rm, "dbqueue.jobs.pushed", kind("neg")); n != 0 {
			t.Errorf("failed push counted %d jobs", n)
		}
		if n := counter(rm, "dbqueue.jobs.pushed", map[attribute.Key]string{dbqotel.AttrJobName: "fine", dbqotel.AttrQueue: "other"}); n != 1 {
			t.Errorf("push to queue other counted %d, want 1", n)
		}
		if sp := spanNamed(t, s.spans, "push neg"); sp.Status().Code != codes.Error || len(sp.Events()) == 0 {
			t.Errorf("failed push span: status %v, %d events; want an error recorded", sp.Status(), len(sp.Events()))
		}
	})
}

// Jobs a stopping worker hands back count as given back, not released;
// a JobReleased hook of the caller's own still hears them, as it did
// before JobGivenBack existed.
func TestGivenBackCounted(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		s := newSDK(t, dbqotel.Options{})
		q := db.Queue(t)
		var heard atomic.Int64
		w := newWorker(t, q, s.inst.WorkerOptions(worker.Options{
			Concurrency: 1, GracePeriod: 50 * time.Millisecond,
			Events: worker.Events{JobReleased: func(context.Context, *dbqueue.Job, time.Duration) { heard.Add(1) }},
		}))
		started := make(chan struct{})
		w.Handle("wait", func(ctx context.Context, job *dbqueue.Job) error {
			close(started)
			<-ctx.Done()
			return ctx.Err()
		})
		if _, err := q.Push(bg, dbqueue.NewJob{Name: "wait"}); err != nil {
			t.Fatal(err)
		}
		runUntil(t, w, started)
		rm := s.collect(t)
		if g, r := counter(rm, "dbqueue.jobs.given_back", kind("wait")), counter(rm, "dbqueue.jobs.released", kind("wait")); g != 1 || r != 0 {
			t.Errorf("given back %d, released %d; want 1 and 0", g, r)
		}
		if heard.Load() != 1 {
			t.Errorf("the caller's JobReleased heard %d given-back jobs, want 1", heard.Load())
		}
	})
}

// The depth gauges read each queue's sizes at collection, stop at
// Unregister, and a read that cannot finish in DepthTimeout is an error
// of that collection, not a hang.
func TestDepthGauge(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		s := newSDK(t, dbqotel.Options{})
		q := db.Queue(t)
		if _, err := q.PushMany(bg, []dbqueue.NewJob{
			{Name: "x", Queue: "a"}, {Name: "x", Queue: "a"},
			{Name: "x", Queue: "b", Delay: time.Hour},
		}); err != nil {
			t.Fatal(err)
		}
		reg, err := s.inst.ObserveDepth(q)
		if err != nil {
			t.Fatal(err)
		}
		rm := s.collect(t)
		depth := func(queue, state string) int64 {
			m, ok := findMetric(rm, "dbqueue.queue.depth")
			if !ok {
				return -1
			}
			for _, p := range m.Data.(metricdata.Gauge[int64]).DataPoints {
				if matches(p.Attributes, map[attribute.Key]string{dbqotel.AttrQueue: queue, dbqotel.AttrJobState: state}) {
					return p.Value
				}
			}
			return -1
		}
		for _, c := range []struct {
			queue, state string
			want         int64
		}{{"a", "pending", 2}, {"a", "delayed", 0}, {"b", "delayed", 1}, {"b", "pending", 0}, {"a", "reserved", 0}} {
			if got := depth(c.queue, c.state); got != c.want {
				t.Errorf("depth{%s,%s} = %d, want %d", c.queue, c.state, got, c.want)
			}
		}
		if _, ok := findMetric(rm, "dbqueue.queue.oldest_pending"); !ok {
			t.Error("no dbqueue.queue.oldest_pending")
		}
		if err := reg.Unregister(); err != nil {
			t.Fatal(err)
		}
		if _, ok := findMetric(s.collect(t), "dbqueue.queue.depth"); ok {
			t.Error("depth still reported after Unregister")
		}

		// A timeout too short for any read: the collection reports it.
		slow := newSDK(t, dbqotel.Options{DepthTimeout: time.Nanosecond})
		if _, err := slow.inst.ObserveDepth(q, "a"); err != nil {
			t.Fatal(err)
		}
		var out metricdata.ResourceMetrics
		if err := slow.reader.Collect(bg, &out); err == nil || !strings.Contains(err.Error(), "dbqotel") {
			t.Errorf("collect with a 1ns depth timeout: %v, want dbqotel's error", err)
		}
	})
}

// Only MaxDepthQueues queues are read when none are named, however many
// hold jobs.
func TestDepthGaugeBounded(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		s := newSDK(t, dbqotel.Options{})
		q := db.Queue(t)
		jobs := make([]dbqueue.NewJob, dbqotel.MaxDepthQueues+5)
		for i := range jobs {
			jobs[i] = dbqueue.NewJob{Name: "x", Queue: fmt.Sprintf("q%03d", i)}
		}
		if _, err := q.PushMany(bg, jobs); err != nil {
			t.Fatal(err)
		}
		if _, err := s.inst.ObserveDepth(q); err != nil {
			t.Fatal(err)
		}
		m, ok := findMetric(s.collect(t), "dbqueue.queue.oldest_pending")
		if !ok {
			t.Fatal("no dbqueue.queue.oldest_pending")
		}
		if n := len(m.Data.(metricdata.Gauge[float64]).DataPoints); n != dbqotel.MaxDepthQueues {
			t.Errorf("%d queues read, want %d", n, dbqotel.MaxDepthQueues)
		}
	})
}

// Without providers nothing is recorded and no header is written: the
// push and the run go as without dbqotel.
func TestNoProviders(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		inst, err := dbqotel.New(dbqotel.Options{})
		if err != nil {
			t.Fatal(err)
		}
		q := db.Queue(t, dbqueue.WithPushMiddleware(inst.PushMiddleware()))
		ctx, span := sdktrace.NewTracerProvider().Tracer("test").Start(bg, "request")
		defer span.End()
		if _, err := q.Push(ctx, dbqueue.NewJob{Name: "plain"}); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		var headers dbqueue.Headers
		w := newWorker(t, q, inst.WorkerOptions(worker.Options{}))
		w.Handle("plain", func(_ context.Context, job *dbqueue.Job) error {
			headers = job.Payload.Headers
			close(done)
			return nil
		})
		runUntil(t, w, done)
		if headers != nil {
			t.Errorf("headers %v written with no TracerProvider", headers)
		}
	})
}
