// Package tracetrim turns the spans of one trace into a compact,
// JSON-serialisable view that fits a token budget, for an AI agent's
// get_trace tool. Tokens are estimated as bytes/4 of the JSON.
//
// Typical use:
//
//	view := tracetrim.Trim(spans, tracetrim.Options{Budget: 8000, Expand: ids})
//	b, _ := json.Marshal(view) // len(b) <= 4*8000 unless view.OverBudget
//
// # Algorithm
//
//  1. Tree. Spans are ordered by (start, span id, end, input position) and
//     linked through ParentSpanID. A span whose parent is absent, or is the
//     span itself, is a root (the trace may be partial). Parent cycles are cut
//     at their earliest span, which becomes a root, so the input is always a
//     forest. Spans sharing an id are all kept; children attach to the earliest
//     of them. Roots with a parent id that could not be used report it as
//     missing_parent.
//  2. Must-keep spans, never dropped: roots, spans with status error, the
//     critical path, the spans in Options.Expand, and every ancestor of those.
//     The critical path is the simple chain: the root that ends last, then
//     repeatedly the child that ends last (ties: the earlier start, then the
//     lower span id), down to a leaf.
//  3. Whole trace. If every span fits with attributes and events, or failing
//     that with attributes and events only on roots, errors and expanded spans,
//     the whole trace is returned.
//  4. Otherwise the must-keep spans are placed first, roots, errors and
//     expanded spans with detail. Everything else is summarised in collapsed
//     groups under its nearest shown ancestor, keyed by service and span name
//     (byName), by service only (name "*"), or by nothing (service and name
//     "*"). If the must-keep spans do not fit with byName groups, coarser
//     groups are tried; if none fits, attributes and events are dropped from
//     roots and then errors, largest first (expanded spans keep theirs;
//     errors keep their message). Only if that fails too is the result marked
//     OverBudget, and nothing more is added.
//  5. The remaining budget is filled greedily from a priority queue of spans
//     whose parent is shown: spans that are or lead to LLM spans first, then
//     by duration plus self time divided by 1+depth/4 (so upper levels come
//     before deep ones), ties by depth and span order. A candidate is added
//     if the estimate stays within the budget, else skipped. The fill is run
//     for the chosen grouping and each coarser one, and the finest grouping
//     is kept whose result has at least 3/4 as many useful lines (shown spans
//     plus groups of two or more spans) as the best: names are kept for
//     repeated work, and merged when a subtree of distinct names would split
//     into groups of one.
//
// # Size accounting
//
// Each node is measured once by marshalling it; the hidden_children field is
// charged at its largest (initial) value, the note at its longest for the
// state, and every collapsed group at an upper bound computed from its
// service and name and the widest numbers the trace can produce. Showing a
// span moves its subtree from its parent's groups to its own: the fill walks
// that subtree to keep the group counts exact, so a candidate costs
// O(subtree), until the walks reach maxFillWork nodes; past that (a deep
// hidden chain under a large budget) a candidate is charged one group per
// kind at most, and its parent's groups are credited back only when it was
// the parent's last hidden child. The whole result is marshalled once, at the
// end, to set Tokens. Since the estimate is an upper bound the result fits;
// a binary search over the fill order backs that up should it ever not.
//
// Numbers are milliseconds rounded to three decimals (microseconds).
package tracetrim
