package dbqotel_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/dbqotel"
	_ "github.com/dbqueue/dbqueue/driver/dbqsqlite" // makes sqlite: DSNs known to Open
	"github.com/dbqueue/dbqueue/migrations"
	"github.com/dbqueue/dbqueue/worker"
)

// Hand dbqotel the application's providers, then give its push middleware
// to the queue and its options to the worker: the job's run is counted,
// and its span joins the trace of the request that pushed it.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "dbqotel-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	dsn := "sqlite:" + filepath.Join(dir, "queue.db")
	if err := migrations.UpDSN(ctx, dsn, migrations.WithLogger(slog.New(slog.DiscardHandler))); err != nil {
		log.Fatal(err)
	}

	// The application's SDK. A real one exports: sdkmetric.NewPeriodicReader
	// with an OTLP exporter, sdktrace.WithBatcher(exporter).
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(ctx)

	otel, err := dbqotel.New(dbqotel.Options{MeterProvider: mp, TracerProvider: tp})
	if err != nil {
		log.Fatal(err)
	}
	q, err := dbqueue.Open(ctx, dsn, dbqueue.WithPushMiddleware(otel.PushMiddleware()))
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()
	depth, err := otel.ObserveDepth(q) // one process per queue is enough
	if err != nil {
		log.Fatal(err)
	}
	defer depth.Unregister()

	// Pushed while handling a request: the job carries its trace.
	reqCtx, request := tp.Tracer("app").Start(ctx, "POST /signup")
	if _, err := q.Push(reqCtx, dbqueue.NewJob{Name: "send-welcome"}); err != nil {
		log.Fatal(err)
	}
	request.End()

	w, err := worker.New(q, otel.WorkerOptions(worker.Options{
		StopWhenEmpty: true,
		Sleep:         10 * time.Millisecond,
		Logger:        slog.New(slog.DiscardHandler),
	}))
	if err != nil {
		log.Fatal(err)
	}
	w.Handle("send-welcome", func(ctx context.Context, job *dbqueue.Job) error {
		span := trace.SpanContextFromContext(ctx)
		fmt.Println("in the request's trace:", span.TraceID() == request.SpanContext().TraceID())
		return nil
	})
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		log.Fatal(err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if sum, ok := m.Data.(metricdata.Sum[int64]); ok && len(sum.DataPoints) > 0 {
			fmt.Printf("%s: %d\n", m.Name, sum.DataPoints[0].Value)
		}
	}
	// Output:
	// in the request's trace: true
	// dbqueue.jobs.pushed: 1
	// dbqueue.jobs.processed: 1
}
