package segment

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
	"strings"
	"unsafe"

	"github.com/cespare/xxhash/v2"

	"github.com/rastro-dev/rastro/internal/model"
)

// The attribute value summary (section 19) answers, for the whole segment
// and without I/O, whether any block may hold a (scope, key, typed value)
// entry of the block filters (section 3: top-level string and int span and
// resource attributes). A query for a value no span of the segment carries
// (an id a customer pasted) is rejected there, before any block filter is
// consulted or any block read.
//
// It lists every key of the segment; a key with few distinct values
// (attrDictMax, attrDictMaxBytes) lists them too, which is exact
// membership. Every entry (of listed keys too) is in one binary fuse
// filter (fuse.go) with attrSummaryBits-bit slots: an absent entry passes
// with probability 2^-16 (1.5e-5), at about 1.13-1.25 x 16 bits per
// distinct entry. The filter's keys are the entries' xxhash64 mixed with a
// salt of the segment, so that two segments holding the same entries
// (every canonical segment holds the same 100 users) do not pass the same
// absent values: false positives are independent across segments. The
// per-block bloom filters are not: a bloom of the same size in two blocks
// tests the same bits for a value, and blocks that share most entries set
// most of the same bits (TestAttrFilterFalsePositives measures it).

// writeNoAttrSummary and writeUnsaltedBlooms are test hooks: set, writers
// omit section 19, or write the block filters in section 3 unsalted
// instead of section 20, as writers before them did, so that tests read
// old segments.
var writeNoAttrSummary, writeUnsaltedBlooms bool

const (
	// attrDictMax and attrDictMaxBytes bound the values listed for a key:
	// a key with more distinct values, or more bytes of them, is answered
	// by the filter alone.
	attrDictMax      = 256
	attrDictMaxBytes = 8 << 10
	// attrSummaryBits is the filter's slot width: false-positive rate 2^-16.
	attrSummaryBits = 16
	// maxAttrSummaryKeys bounds the keys listed (a writer that meets more
	// marks the list incomplete: an unlisted key is then answered by the
	// filter).
	maxAttrSummaryKeys = 1 << 12

	attrSummaryKeysComplete = 1 // flag: every key of the segment is listed
	attrSummaryHasFilter    = 2 // flag: the fuse filter follows the key list
	// attrSummaryIntsCoverDoubles flags a segment whose writer entered a
	// double equal to an integer as that int (appendBloomEntry) in this
	// summary and in its block filters; segments written before have
	// doubles in neither, and a search for a number cannot use them.
	attrSummaryIntsCoverDoubles = 4

	attrKeyFilter = 0 // a listed key whose values only the filter knows
	attrKeyDict   = 1 // a listed key whose distinct values are listed
)

// maxAttrSummaryEntries bounds the distinct entries filtered: beyond it the
// writer writes no filter (keys without a dictionary then always pass). It
// bounds what a writer holds (8 bytes per distinct entry, twice that while
// they are sorted, about 30 while the filter is built: 60 MiB at the
// bound) and what a reader keeps resident (about 5 MiB). A variable for
// tests.
var maxAttrSummaryEntries = 1 << 21

// attrEntryHash is the 64-bit hash of a filter entry (appendBloomStr,
// appendBloomInt); the filter's key is fuseMix(hash ^ salt).
func attrEntryHash(entry []byte) uint64 { return xxhash.Sum64(entry) }

// attrKeyState is what the writer knows of one key.
type attrKeyState struct {
	vals  map[string]struct{} // tag byte + value bytes; nil once past the dictionary limits
	bytes int
}

// attrSummaryWriter gathers a segment's entries block by block.
type attrSummaryWriter struct {
	keys     map[string]*attrKeyState // scope byte + key
	complete bool
	filter   bool
	hashes   []uint64 // [:sorted] sorted and distinct; the rest appended since
	sorted   int
}

func newAttrSummaryWriter() *attrSummaryWriter {
	return &attrSummaryWriter{keys: map[string]*attrKeyState{}, complete: true, filter: true}
}

// addBlock records the distinct entries of one block (the block encoder's
// filter entries, each with the length of its key).
func (a *attrSummaryWriter) addBlock(entries map[string]int) {
	for entry, keyLen := range entries {
		a.add(entry, keyLen)
	}
	if len(a.hashes)-a.sorted > max(a.sorted, 1<<16) {
		a.compact()
	}
}

// add records one entry: scope byte | key (keyLen bytes) | 0 | tag | value.
func (a *attrSummaryWriter) add(entry string, keyLen int) {
	sk, tv := entry[:1+keyLen], entry[2+keyLen:]
	st := a.keys[sk]
	if st == nil {
		if len(a.keys) >= maxAttrSummaryKeys {
			a.complete = false
		} else {
			st = &attrKeyState{vals: map[string]struct{}{}}
			a.keys[sk] = st
		}
	}
	if st != nil && st.vals != nil {
		if _, ok := st.vals[tv]; !ok {
			if len(st.vals) >= attrDictMax || st.bytes+len(tv) > attrDictMaxBytes {
				st.vals = nil
			} else {
				st.vals[tv] = struct{}{}
				st.bytes += len(tv)
			}
		}
	}
	if a.filter {
		a.hashes = append(a.hashes, attrEntryHash(unsafe.Slice(unsafe.StringData(entry), len(entry))))
	}
}

// compact sorts and deduplicates the hashes, giving up the filter when the
// distinct entries exceed maxAttrSummaryEntries.
func (a *attrSummaryWriter) compact() {
	slices.Sort(a.hashes)
	a.hashes = slices.Compact(a.hashes)
	a.sorted = len(a.hashes)
	if len(a.hashes) > maxAttrSummaryEntries {
		a.filter, a.hashes, a.sorted = false, nil, 0
	}
}

// encode returns section 19:
//
//	uvarint flags | u64 LE salt | uvarint n keys |
//	n x (str scope+key | byte mode | mode 1: uvarint m | m x str tag+value, sorted) |
//	flag 2: uvarint entries | u64 LE seed | uvarint segLen | uvarint segCount | uvarint w | uvarint pages | pages x 64 bytes
//
// Keys are sorted by their bytes; a scope is 's' (span) or 'r' (resource).
// Flags: 1 every key is listed, 2 the filter follows, 4 doubles equal to
// integers are entered as ints (here and in the block filters).
// salt is chosen by the caller from the segment (its span count and time
// range), so segments with the same entries get unrelated filters.
func (a *attrSummaryWriter) encode(salt uint64) ([]byte, error) {
	a.compact()
	flags := uint64(attrSummaryIntsCoverDoubles)
	if a.complete {
		flags |= attrSummaryKeysComplete
	}
	var shape fuseShape
	var pages []byte
	if a.filter {
		keys := make([]uint64, len(a.hashes))
		for i, h := range a.hashes {
			keys[i] = fuseMix(h ^ salt)
		}
		var err error
		if shape, pages, err = buildFuse(keys, nil, attrSummaryBits); err != nil {
			return nil, fmt.Errorf("attribute value summary: %w", err)
		}
		flags |= attrSummaryHasFilter
	}
	out := binary.AppendUvarint(nil, flags)
	out = le.AppendUint64(out, salt)
	names := make([]string, 0, len(a.keys))
	for k := range a.keys {
		names = append(names, k)
	}
	slices.Sort(names)
	out = binary.AppendUvarint(out, uint64(len(names)))
	for _, k := range names {
		out = appendStr(out, k)
		st := a.keys[k]
		if st.vals == nil {
			out = append(out, attrKeyFilter)
			continue
		}
		out = append(out, attrKeyDict)
		vals := make([]string, 0, len(st.vals))
		for v := range st.vals {
			vals = append(vals, v)
		}
		slices.Sort(vals)
		out = binary.AppendUvarint(out, uint64(len(vals)))
		for _, v := range vals {
			out = appendStr(out, v)
		}
	}
	if a.filter {
		out = binary.AppendUvarint(out, uint64(len(a.hashes)))
		out = le.AppendUint64(out, shape.seed)
		out = appendUvarints(out, uint64(shape.segLen), uint64(shape.segCount), uint64(shape.w), uint64(shape.pages()))
		out = append(out, pages...)
	}
	a.keys, a.hashes = nil, nil
	return out, nil
}

// attrSummarySalt derives a segment's salt from what differs between
// segments: its span count and time range.
func attrSummarySalt(info Info) uint64 {
	return fuseMix(uint64(info.Spans)*0x9e3779b97f4a7c15 ^ fuseMix(info.MinStart) ^ fuseMix(info.MaxStart+1))
}

// attrSummary is the resident, decoded section 19. Its strings are
// substrings of the section, which it keeps.
type attrSummary struct {
	present  bool
	err      error // damage found at Open: the summary is not used
	complete bool
	doubles  bool // attrSummaryIntsCoverDoubles
	salt     uint64
	keys     map[string][]string // scope+key -> sorted tag+value (nil: filter only)
	filter   bool
	entries  int
	shape    fuseShape
	pages    string
	bytes    int // resident estimate
}

// decodeAttrSummary parses section 19.
func decodeAttrSummary(s string) (attrSummary, error) {
	d := dec{s: s}
	x := attrSummary{present: true}
	flags := d.uvarint()
	x.complete = flags&attrSummaryKeysComplete != 0
	x.filter = flags&attrSummaryHasFilter != 0
	x.doubles = flags&attrSummaryIntsCoverDoubles != 0
	x.salt = d.u64le()
	n := d.count(2)
	x.keys = make(map[string][]string, n)
	prev := ""
	for i := 0; i < n && d.err == nil; i++ {
		k := d.str()
		if len(k) < 1 || (k[0] != 's' && k[0] != 'r') {
			d.failf(fmt.Sprintf("key %d: scope %q is neither span nor resource", i, k))
			break
		}
		if i > 0 && k <= prev {
			d.failf(fmt.Sprintf("key %d out of order", i))
			break
		}
		prev = k
		switch mode := d.byte1(); mode {
		case attrKeyFilter:
			x.keys[k] = nil
		case attrKeyDict:
			m := d.count(1)
			if d.err == nil && (m == 0 || m > attrDictMax) {
				d.failf(fmt.Sprintf("key %d lists %d values, more than %d", i, m, attrDictMax))
				break
			}
			vals := make([]string, m)
			for j := range vals {
				vals[j] = d.str()
				if j > 0 && vals[j] <= vals[j-1] {
					d.failf(fmt.Sprintf("key %d: values out of order", i))
					break
				}
			}
			x.keys[k] = vals
			x.bytes += 16 * m
		default:
			if d.err == nil {
				d.failf(fmt.Sprintf("key %d: unknown mode %d", i, mode))
			}
		}
		x.bytes += 16 + 24 + 48 // map entry, slice header and bucket share, roughly
	}
	if x.filter && d.err == nil {
		x.entries = d.count(0)
		x.shape.seed = d.u64le()
		segLen, segCount, w, pages := d.uvarint(), d.uvarint(), d.uvarint(), d.uvarint()
		switch {
		case d.err != nil:
		case segLen == 0 || segLen > maxFuseSeg || segLen&(segLen-1) != 0:
			d.failf(fmt.Sprintf("filter segment length %d is not a power of two up to %d", segLen, maxFuseSeg))
		case segCount == 0 || segCount > maxFuseSlots || (segCount+2)*segLen > maxFuseSlots:
			d.failf(fmt.Sprintf("filter of %d segments of %d slots exceeds the limit", segCount, segLen))
		case w < 8 || w > 32:
			d.failf(fmt.Sprintf("filter slots of %d bits", w))
		default:
			x.shape.segLen, x.shape.segCount, x.shape.w = uint32(segLen), uint32(segCount), uint32(w)
			x.shape.slots = uint32((segCount + 2) * segLen)
			if uint64(x.shape.pages()) != pages {
				d.failf(fmt.Sprintf("filter of %d slots in %d pages, want %d", x.shape.slots, pages, x.shape.pages()))
				break
			}
			x.pages = d.fixed(int(pages) * fusePageBytes)
		}
	}
	if d.err == nil && d.remaining() != 0 {
		d.failf(fmt.Sprintf("%d trailing bytes", d.remaining()))
	}
	if d.err != nil {
		return attrSummary{present: true}, d.err
	}
	x.bytes += len(s) + int(unsafe.Sizeof(x))
	return x, nil
}

// mayContain answers for one entry (appendBloomStr / appendBloomInt) whose
// key is entry[:keyEnd] (scope byte + key).
func (x *attrSummary) mayContain(entry []byte, keyEnd int) bool {
	if !x.present || x.err != nil {
		return true
	}
	vals, listed := x.keys[string(entry[:keyEnd])]
	if !listed {
		if x.complete {
			return false
		}
	} else if vals != nil {
		tv := string(entry[keyEnd+1:])
		i := sort.SearchStrings(vals, tv)
		return i < len(vals) && vals[i] == tv
	}
	if !x.filter {
		return true
	}
	return fuseLookup(&x.shape, x.pages, fuseMix(attrEntryHash(entry)^x.salt)) == 0
}

// openAttrSummary loads section 19 when the segment has one. Damage does
// not fail Open: it is kept in r.attrs.err (Verify reports it) and the
// segment is answered as if it had no summary.
func (r *Reader) openAttrSummary(sections map[uint32]tocEntry, load func(uint32) (string, int64, error)) {
	if _, ok := sections[sectionAttrSummary]; !ok {
		return
	}
	s, off, err := load(sectionAttrSummary)
	if err != nil {
		r.attrs = attrSummary{present: true, err: err}
		return
	}
	r.resident -= len(s)
	x, err := decodeAttrSummary(s)
	if err != nil {
		r.attrs = attrSummary{present: true, err: r.corrupt(off, "attribute value summary: %v", err)}
		return
	}
	r.attrs = x
	r.resident += x.bytes
}

// HasAttrSummary reports whether the segment has an intact attribute value
// summary (section 19; segments written before it have none).
func (r *Reader) HasAttrSummary() bool { return r.attrs.present && r.attrs.err == nil }

// AttrSummaryErr returns the damage found in the attribute value summary
// at Open (nil when it is intact or absent). A damaged summary is not used:
// SegmentMayContainAttr then passes everything, and the block filters
// decide alone.
func (r *Reader) AttrSummaryErr() error { return r.attrs.err }

// AttrSummaryBytes is the resident size of the attribute value summary
// (counted in ResidentBytes too).
func (r *Reader) AttrSummaryBytes() int {
	if !r.HasAttrSummary() {
		return 0
	}
	return r.attrs.bytes
}

// SegmentMayContainAttr reports, from the resident summary alone, whether
// any span of the segment may have the span attribute (resource=false) or
// resource attribute (resource=true) key with the string value. Absent
// keys, and absent values of keys with few values, are answered exactly;
// other absent values pass with probability 2^-16. Without a summary it
// returns true.
func (r *Reader) SegmentMayContainAttr(resource bool, key, value string) bool {
	var buf [256]byte
	b := appendBloomStr(buf[:0], resource, key, value)
	return r.attrs.mayContain(b, 1+len(key))
}

// SegmentMayContainIntAttr is SegmentMayContainAttr for an int value.
func (r *Reader) SegmentMayContainIntAttr(resource bool, key string, value int64) bool {
	var buf [256]byte
	b := appendBloomInt(buf[:0], resource, key, value)
	return r.attrs.mayContain(b, 1+len(key))
}

// IntEntriesCoverDoubles reports whether the segment's intact summary and
// its block filters hold a double attribute equal to an integer as that
// int's entry, so that SegmentMayContainIntAttr and MayContainIntAttr
// answer for the doubles a TraceQL number equality matches too. False for
// segments written before (their filters hold no doubles) and without an
// intact summary: a search for a number then cannot rule anything out.
func (r *Reader) IntEntriesCoverDoubles() bool { return r.HasAttrSummary() && r.attrs.doubles }

// AttrSummaryStats describes a segment's attribute value summary.
type AttrSummaryStats struct {
	Keys, DictKeys, DictValues int
	Entries                    int // distinct entries in the filter
	FilterBytes                int // the filter's pages
	FP                         float64
}

// AttrSummaryStats returns the shape of the summary (zero without one).
func (r *Reader) AttrSummaryStats() AttrSummaryStats {
	if !r.HasAttrSummary() {
		return AttrSummaryStats{}
	}
	x := &r.attrs
	st := AttrSummaryStats{Keys: len(x.keys), Entries: x.entries, FilterBytes: len(x.pages)}
	for _, v := range x.keys {
		if v != nil {
			st.DictKeys++
			st.DictValues += len(v)
		}
	}
	if x.filter {
		st.FP = 1 / float64(uint64(1)<<x.shape.w)
	}
	return st
}

// missing is Verify's check of section 19 against a block's entries:
// every entry must pass (no false negatives); it returns one that does not.
func (x *attrSummary) missing(entries map[string]int) (string, bool) {
	for e, keyLen := range entries {
		if !x.mayContain([]byte(e), 1+keyLen) {
			return strings.Clone(e), true
		}
	}
	return "", false
}

// attrEntries returns the filter entries of decoded spans (as the block
// encoder records them), each with the length of its key; doubles equal to
// integers only when doubles says the writer entered them
// (Reader.IntEntriesCoverDoubles). Values kept in the value store are left
// out: a decoded span holds their references, and the writer took their
// entries from the full values.
func attrEntries(spans []model.Span, doubles bool) map[string]int {
	out := map[string]int{}
	var b []byte
	add := func(resource bool, kv model.KeyValue) {
		if kv.Value.Type == model.ValueDouble && !doubles {
			return
		}
		var ok bool
		if b, ok = appendBloomEntry(b[:0], resource, kv); ok {
			out[string(b)] = len(kv.Key)
		}
	}
	for i := range spans {
		for _, kv := range spans[i].Attributes {
			add(false, kv)
		}
		if spans[i].Resource != nil {
			for _, kv := range spans[i].Resource.Attributes {
				add(true, kv)
			}
		}
	}
	return out
}
