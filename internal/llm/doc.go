// Package llm derives the normalised LLM fields of a span (model.LLM) from
// whichever attribute dialect the client sent: OTel GenAI semantic
// conventions (current and legacy), OpenInference, OpenLLMetry (traceloop)
// and Langfuse. It also prices token usage from a dated price table and
// extracts the chat messages of an LLM call.
//
// The rules (which attribute wins, what includes what, which spans count
// toward usage totals) are written down with their sources in docs/llm.md.
//
// Typical use at ingest:
//
//	prices := llm.DefaultPrices()
//	llm.Enrich(spans, prices) // sets spans[i].LLM
//
// Extract runs on every ingested span, so it makes one pass over the span's
// attribute keys and returns nil at once for spans with no LLM attribute.
package llm
