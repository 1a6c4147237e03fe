// Package bench is Rastro's benchmark harness: deterministic corpus
// generators (canonical, llm, api), a load generator that speaks every
// ingest protocol the server accepts, and the benchmark suites run by
// `rastro bench`, with their statistics, refusal rules and report writers.
//
// Everything a measurement sends is generated and encoded before its clock
// starts, so the figures are server rates, not client rates.
package bench
