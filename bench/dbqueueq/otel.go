package dbqueueq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/dbqotel"
)

// OTelSuffix ends the name of a system run with Options.OTel, so a
// comparison lists it beside the same system without.
const OTelSuffix = "-otel"

// OTelInterval is how often the bench's metric reader collects (and so
// reads the depth gauges): often enough that a measurement of a few
// seconds pays for collections as an application would.
const OTelInterval = time.Second

// otelSDK is the OpenTelemetry SDK an application would wire, exporting
// nowhere: every span sampled and batched, every metric aggregated and
// collected each OTelInterval, then dropped. What it costs is what
// instrumenting dbqueue costs, less only the network.
type otelSDK struct {
	inst  *dbqotel.Instrumentation
	mp    *sdkmetric.MeterProvider
	tp    *sdktrace.TracerProvider
	depth metric.Registration
}

func newOTelSDK() (*otelSDK, error) {
	s := &otelSDK{
		mp: sdkmetric.NewMeterProvider(sdkmetric.WithReader(
			sdkmetric.NewPeriodicReader(discardMetrics{}, sdkmetric.WithInterval(OTelInterval)))),
		tp: sdktrace.NewTracerProvider(
			sdktrace.WithSampler(sdktrace.AlwaysSample()),
			sdktrace.WithBatcher(tracetest.NewNoopExporter())),
	}
	inst, err := dbqotel.New(dbqotel.Options{MeterProvider: s.mp, TracerProvider: s.tp})
	if err != nil {
		return nil, fmt.Errorf("otel: %w", err)
	}
	s.inst = inst
	return s, nil
}

// observe starts the depth gauges on q.
func (s *otelSDK) observe(q *dbqueue.Queue) error {
	reg, err := s.inst.ObserveDepth(q)
	if err != nil {
		return fmt.Errorf("otel: %w", err)
	}
	s.depth = reg
	return nil
}

func (s *otelSDK) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	if s.depth != nil {
		errs = append(errs, s.depth.Unregister())
	}
	return errors.Join(append(errs, s.mp.Shutdown(ctx), s.tp.Shutdown(ctx))...)
}

// discardMetrics is a metric exporter that drops what it is given.
type discardMetrics struct{}

func (discardMetrics) Temporality(k sdkmetric.InstrumentKind) metricdata.Temporality {
	return sdkmetric.DefaultTemporalitySelector(k)
}

func (discardMetrics) Aggregation(k sdkmetric.InstrumentKind) sdkmetric.Aggregation {
	return sdkmetric.DefaultAggregationSelector(k)
}

func (discardMetrics) Export(context.Context, *metricdata.ResourceMetrics) error { return nil }
func (discardMetrics) ForceFlush(context.Context) error                          { return nil }
func (discardMetrics) Shutdown(context.Context) error                            { return nil }
