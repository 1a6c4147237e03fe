package engine

import (
	"time"

	"github.com/rastro-dev/rastro/internal/model"
)

// Buffer exposes the write buffer to the external tests (which may import
// internal/bench, which imports this package).
type Buffer = memtable

// NewBuffer makes an empty write buffer sized after prev (nil: small).
func NewBuffer(prev *Buffer) *Buffer { return newMemtable(time.Now(), prev) }

// Insert, Bytes and Live are insert, the size estimate and the live rows.
func (m *memtable) Insert(project string, spans []model.Span, bodyBytes int64) {
	m.insert(project, spans, bodyBytes)
}
func (m *memtable) Bytes() int64 { return m.bytes.Load() }
func (m *memtable) Live() int64  { return m.live.Load() }
