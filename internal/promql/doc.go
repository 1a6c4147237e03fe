// Package promql parses and evaluates the subset of PromQL that Rastro's
// Prometheus-compatible API answers (docs/metrics.md): instant and range
// vector selectors with =, !=, =~ and !~ matchers; rate and increase (with
// Prometheus' counter-reset handling and extrapolation); sum, avg, min, max
// and count, by or without labels; histogram_quantile over classic
// (le-labelled) buckets; and +, -, *, / between a vector or a number and a
// number. Anything else is refused by the parser with an error naming the
// construct (an *Error of kind Unsupported).
//
// Evaluation follows Prometheus 3: a range query is evaluated at start,
// start+step, ... up to end; an instant selector takes a series' newest
// sample in (t-lookback, t]; a range selector the samples in (t-range, t].
package promql
