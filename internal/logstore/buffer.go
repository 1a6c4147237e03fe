package logstore

import (
	"slices"

	"github.com/rastro-dev/rastro/internal/model"
)

// chunkRecords is how many buffered records one chunk summary covers: the
// size of a segment block, so the buffer prunes as a segment does.
const chunkRecords = BlockRecords

// projBuf is one project's buffered records, in WAL order, with a summary
// of every full chunk of chunkRecords records (time and severity range,
// services, Bloom filters over trace ids and words) so that a search skips
// the chunks that cannot match instead of looking at every record.
type projBuf struct {
	es   []entry
	sums []chunkSum
}

type chunkSum struct {
	minT, maxT     uint64
	minSev, maxSev model.SeverityNumber
	services       []string
	traces, tokens bloom
}

func newProjBuf(es []entry) *projBuf {
	pb := &projBuf{es: es}
	for len(pb.sums) < len(es)/chunkRecords {
		pb.summarise()
	}
	return pb
}

func (pb *projBuf) push(e entry) {
	pb.es = append(pb.es, e)
	if len(pb.es)%chunkRecords == 0 {
		pb.summarise()
	}
}

// summarise adds the summary of the next full chunk.
func (pb *projBuf) summarise() {
	i := len(pb.sums)
	chunk := pb.es[i*chunkRecords : (i+1)*chunkRecords]
	sum := chunkSum{minT: chunk[0].rec.Time(), minSev: chunk[0].rec.SeverityNumber, maxSev: chunk[0].rec.SeverityNumber}
	nTok, nTrace := 0, 0
	for j := range chunk {
		nTok += len(chunk[j].toks)
		if !chunk[j].rec.TraceID.IsZero() {
			nTrace++
		}
	}
	sum.tokens, sum.traces = newBloom(nTok), newBloom(nTrace)
	for j := range chunk {
		r := &chunk[j].rec
		t := r.Time()
		sum.minT, sum.maxT = min(sum.minT, t), max(sum.maxT, t)
		sum.minSev, sum.maxSev = min(sum.minSev, r.SeverityNumber), max(sum.maxSev, r.SeverityNumber)
		if !slices.Contains(sum.services, r.Service) {
			sum.services = append(sum.services, r.Service)
		}
		if !r.TraceID.IsZero() {
			sum.traces.add(traceHash(r.TraceID))
		}
		toks := chunk[j].toks
		if toks == nil {
			recordTokens(r, sum.tokens.add)
		}
		for _, h := range toks {
			sum.tokens.add(h)
		}
	}
	pb.sums = append(pb.sums, sum)
}

// chunkMayMatch prunes a chunk by its summary, as blockMayMatch a block.
func (c *compiled) chunkMayMatch(m *chunkSum) bool {
	return c.blockMayMatch(&blockMeta{minT: m.minT, maxT: m.maxT, minSev: m.minSev, maxSev: m.maxSev,
		services: m.services, traces: m.traces, tokens: m.tokens})
}
