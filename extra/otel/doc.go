// Package otel is the OpenTelemetry instrumentation of dlock: spans for every Lock,
// TryLock and Acquire call and for every hold, and the metrics of extra/prometheus through
// an OpenTelemetry meter.
package otel
