package dbqotel

import (
	"context"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/worker"
)

// Attribute keys on a process span.
const (
	// AttrJobID is the job's id in the jobs table.
	AttrJobID = attribute.Key("dbqueue.job.id")
	// AttrJobAttempt counts the job's reservations, this one included.
	AttrJobAttempt = attribute.Key("dbqueue.job.attempt")
)

// WorkerOptions returns o with dbqotel's middleware first in
// o.Middleware (outermost, so the span covers every other middleware and
// they see it in their context) and its hooks in o.Events, each calling
// o's own hook after recording. Pass the result to worker.New; o itself
// is not changed.
//
// If o.Events.JobGivenBack is nil and o.Events.JobReleased is set, that
// hook still hears given-back jobs with a zero delay, as it would without
// dbqotel.
func (i *Instrumentation) WorkerOptions(o worker.Options) worker.Options {
	o.Middleware = slices.Concat([]worker.Middleware{i.middleware}, o.Middleware)
	o.Events = i.events(o.Events)
	return o
}

// middleware times each run and, with a TracerProvider, wraps it in a
// consumer span, the child of the trace context in the payload headers.
func (i *Instrumentation) middleware(next worker.HandlerFunc) worker.HandlerFunc {
	return func(ctx context.Context, job *dbqueue.Job) error {
		attrs := i.jobAttrs(job)
		i.wait.Record(ctx, since(job.AvailableAt), attrs.record...)
		var span trace.Span
		if i.tracing {
			ctx, span = i.startRun(ctx, job)
		}
		begun := time.Now()
		err := next(ctx, job)
		i.duration.Record(ctx, time.Since(begun).Seconds(), attrs.record...)
		if span != nil {
			if err != nil {
				// ReleaseAfter, FailNow and Discard are errors too: the
				// span records them, but only an exception is a failure.
				span.RecordError(err)
				if !worker.IsOutcome(err) {
					span.SetStatus(codes.Error, err.Error())
				}
			}
			span.End()
		}
		return err
	}
}

// startRun starts the run's span. The parent is the push's context from
// the payload headers; a job without one (pushed by Laravel, or before
// tracing) gets a new root rather than the worker's own context, which
// would make one trace of every job a worker ever ran.
func (i *Instrumentation) startRun(ctx context.Context, job *dbqueue.Job) (context.Context, trace.Span) {
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(MessagingSystem, AttrQueue.String(job.Queue), AttrJobName.String(job.Name()),
			AttrJobID.Int64(job.ID), AttrJobAttempt.Int(job.Attempts)),
	}
	// Drop the worker's span, if any, before extracting, so it is the
	// parent of no job; the context's other values (baggage too) stay.
	if trace.SpanContextFromContext(ctx).IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, trace.SpanContext{})
	}
	ctx = i.prop.Extract(ctx, propagation.MapCarrier(job.Payload.Headers))
	return i.tracer.Start(ctx, "process "+job.Name(), opts...)
}

// events records the worker's outcomes and then calls next's hooks.
func (i *Instrumentation) events(next worker.Events) worker.Events {
	ev := next
	ev.JobProcessed = func(ctx context.Context, job *dbqueue.Job, took time.Duration) {
		i.processed.Add(ctx, 1, i.jobAttrs(job).add...)
		if next.JobProcessed != nil {
			next.JobProcessed(ctx, job, took)
		}
	}
	ev.JobFailed = func(ctx context.Context, job *dbqueue.Job, err error) {
		i.failed.Add(ctx, 1, i.jobAttrs(job).add...)
		if next.JobFailed != nil {
			next.JobFailed(ctx, job, err)
		}
	}
	ev.JobReleased = func(ctx context.Context, job *dbqueue.Job, delay time.Duration) {
		i.released.Add(ctx, 1, i.jobAttrs(job).add...)
		if next.JobReleased != nil {
			next.JobReleased(ctx, job, delay)
		}
	}
	ev.JobReleasedAfterException = func(ctx context.Context, job *dbqueue.Job, delay time.Duration) {
		i.released.Add(ctx, 1, i.jobAttrs(job).add...)
		if next.JobReleasedAfterException != nil {
			next.JobReleasedAfterException(ctx, job, delay)
		}
	}
	ev.JobGivenBack = func(ctx context.Context, job *dbqueue.Job) {
		i.givenBack.Add(ctx, 1, i.jobAttrs(job).add...)
		switch {
		case next.JobGivenBack != nil:
			next.JobGivenBack(ctx, job)
		case next.JobReleased != nil:
			next.JobReleased(ctx, job, 0) // what it heard before JobGivenBack
		}
	}
	return ev
}
