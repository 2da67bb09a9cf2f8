package dbqotel_test

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/dbqotel"
	"github.com/dbqueue/dbqueue/worker"
)

// benchSetups are the configurations the benchmarks compare: dbqotel with
// no providers, metrics only, and metrics with every span sampled and
// batched to an exporter that drops them.
func benchSetups(b *testing.B) map[string]*dbqotel.Instrumentation {
	b.Helper()
	mp := func() *sdkmetric.MeterProvider {
		return sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	b.Cleanup(func() { tp.Shutdown(context.Background()) })
	out := map[string]*dbqotel.Instrumentation{}
	for name, o := range map[string]dbqotel.Options{
		"off":            {},
		"metrics":        {MeterProvider: mp()},
		"metrics+traces": {MeterProvider: mp(), TracerProvider: tp},
	} {
		inst, err := dbqotel.New(o)
		if err != nil {
			b.Fatal(err)
		}
		out[name] = inst
	}
	return out
}

// What dbqotel adds to one job's run in the worker: the middleware around
// a no-op handler and the JobProcessed hook.
func BenchmarkRun(b *testing.B) {
	job := &dbqueue.Job{ID: 1, Queue: "default", Attempts: 1, AvailableAt: time.Now(),
		Payload: dbqueue.Payload{Job: "bench", Headers: dbqueue.Headers{
			"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}}
	for name, inst := range benchSetups(b) {
		b.Run(name, func(b *testing.B) {
			o := inst.WorkerOptions(worker.Options{})
			run := o.Middleware[0](func(context.Context, *dbqueue.Job) error { return nil })
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if err := run(ctx, job); err != nil {
					b.Fatal(err)
				}
				o.Events.JobProcessed(ctx, job, time.Millisecond)
			}
		})
	}
}

// What dbqotel adds to a PushMany of 1,000 jobs, the database left out.
func BenchmarkPush1000(b *testing.B) {
	jobs := make([]dbqueue.NewJob, 1000)
	for i := range jobs {
		jobs[i] = dbqueue.NewJob{Name: "bench"}
	}
	ids := make([]int64, len(jobs))
	next := func(context.Context, []dbqueue.NewJob) ([]int64, error) { return ids, nil }
	for name, inst := range benchSetups(b) {
		b.Run(name, func(b *testing.B) {
			push := inst.PushMiddleware()
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				batch := append([]dbqueue.NewJob(nil), jobs...)
				if _, err := push(ctx, batch, next); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
