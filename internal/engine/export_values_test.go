package engine

import "github.com/rastro-dev/rastro/internal/valuestore"

// HasValue reports whether the value store holds a value (a piece) with
// this SHA-256, for the external tests.
func (e *Engine) HasValue(h [32]byte) bool { return e.values.Has(valuestore.Ref(h)) }
