package segment

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"

	"github.com/rastro-dev/rastro/internal/model"
)

// lookAlikeCorpus has spans whose attributes hold Unicode values in NFC, in
// a key with few values (customer.name: a dictionary) and one with many
// (order.id: the filter), an int attribute and a resource attribute.
func lookAlikeCorpus() ([]model.Span, []string, []string) {
	names := []string{"Zoë", "Ångström", "café", "Łódź", "한국어", "ﬁnance", "İstanbul", "straße"}
	var orders []string
	for i := range 2000 {
		orders = append(orders, fmt.Sprintf("ord-é-%d", 1000+i))
	}
	res := &model.Resource{Attributes: []model.KeyValue{{Key: "service.name", Value: model.StringValue("shop")},
		{Key: "deployment.region", Value: model.StringValue("eu-Ørsted")}}}
	var spans []model.Span
	for i, o := range orders {
		s := model.Span{Name: "op", Service: "shop", Resource: res, StartTimeUnixNano: uint64(1e18) + uint64(i)*1e6,
			EndTimeUnixNano: uint64(1e18) + uint64(i)*1e6 + 5e5}
		s.TraceID[0], s.TraceID[1], s.SpanID[0], s.SpanID[1] = byte(i), byte(i>>8), 1, byte(i)
		s.Attributes = []model.KeyValue{
			{Key: "customer.name", Value: model.StringValue(norm.NFC.String(names[i%len(names)]))},
			{Key: "order.id", Value: model.StringValue(norm.NFC.String(o))},
			{Key: "http.response.status_code", Value: model.IntValue(200)},
			{Key: "order.total", Value: model.DoubleValue(float64(i%5) + float64(i%10/9)*0.5)}, // 0..4, and 4.5
		}
		spans = append(spans, s)
	}
	return spans, names, orders
}

// lookAlikes returns values that differ from v only in normal form, case
// or a character at the end.
func lookAlikes(v string) []string {
	out := []string{norm.NFD.String(v), norm.NFKC.String(v), norm.NFKD.String(v), strings.ToUpper(v), strings.ToLower(v),
		strings.ToTitle(v), v + "5", v + " ", " " + v}
	if r := []rune(v); len(r) > 1 {
		out = append(out, string(r[:len(r)-1]))
	}
	return out
}

// TestAttrSummaryRejectsLookAlikes checks that values sharing a prefix,
// case or Unicode normal form with present ones are rejected by the
// segment's summary: always by a key's dictionary, and by the filter at
// its rate; that an int value does not answer for its decimal string nor a
// span attribute for a resource one; and that every present value passes.
func TestAttrSummaryRejectsLookAlikes(t *testing.T) {
	spans, names, orders := lookAlikeCorpus()
	path, _ := writeCorpus(t, map[string][]model.Span{"p": spans}, WriterOptions{BlockSpans: 100})
	r := openT(t, path)
	if !r.HasAttrSummary() || r.attrs.keys["scustomer.name"] == nil || r.attrs.keys["sorder.id"] != nil {
		t.Fatalf("summary: want customer.name listed, order.id filtered: %+v", r.AttrSummaryStats())
	}
	for _, n := range names {
		n = norm.NFC.String(n)
		if !r.SegmentMayContainAttr(false, "customer.name", n) {
			t.Fatalf("present customer.name %q rejected", n)
		}
		for _, v := range lookAlikes(n) {
			if v != n && r.SegmentMayContainAttr(false, "customer.name", v) {
				t.Errorf("customer.name %q (%+q) passes; only %q (%+q) is present", v, v, n, n)
			}
		}
	}
	passed, tried := 0, 0
	for _, o := range orders {
		o = norm.NFC.String(o)
		if !r.SegmentMayContainAttr(false, "order.id", o) {
			t.Fatalf("present order.id %q rejected", o)
		}
		for _, v := range lookAlikes(o) {
			if v == o || slicesContain(orders, v) {
				continue
			}
			tried++
			if r.SegmentMayContainAttr(false, "order.id", v) {
				passed++
			}
		}
	}
	// 2^-16 of about 20,000: 0.3 expected.
	if passed > 3 {
		t.Errorf("filter passes %d of %d look-alike order ids", passed, tried)
	}
	t.Logf("filter: %d of %d look-alike order ids passed", passed, tried)
	if !r.SegmentMayContainIntAttr(false, "http.response.status_code", 200) {
		t.Fatal("present int 200 rejected")
	}
	if r.SegmentMayContainAttr(false, "http.response.status_code", "200") || r.SegmentMayContainIntAttr(false, "http.response.status_code", 201) {
		t.Error("an absent status code (string \"200\", int 201) passes")
	}
	// Doubles that equal integers are entered as those ints (TraceQL's
	// `.a = 3` matches the double 3.0); fractions are not entered.
	if !r.IntEntriesCoverDoubles() {
		t.Fatal("a new segment does not say that its int entries cover doubles")
	}
	for v := range int64(5) {
		if !r.SegmentMayContainIntAttr(false, "order.total", v) {
			t.Fatalf("present double order.total %d.0 rejected", v)
		}
	}
	if r.SegmentMayContainIntAttr(false, "order.total", 5) || r.SegmentMayContainIntAttr(false, "order.total", -1) {
		t.Error("an absent order.total (5, -1) passes")
	}
	if !r.SegmentMayContainAttr(true, "deployment.region", norm.NFC.String("eu-Ørsted")) {
		t.Fatal("present resource attribute rejected")
	}
	if r.SegmentMayContainAttr(false, "deployment.region", "eu-Ørsted") || r.SegmentMayContainAttr(true, "customer.name", norm.NFC.String("café")) {
		t.Error("a value passes under the other scope")
	}
	if n := r.AttrSummaryBytes(); n <= 0 || n > r.ResidentBytes() {
		t.Errorf("summary resident bytes %d, reader total %d", n, r.ResidentBytes())
	}
}

func slicesContain(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// TestAttrSummaryAbsentInOldSegments checks that segments without section
// 19 (committed fixtures, and a writer told to omit it) are answered as
// before: the summary passes everything and the block filters decide.
func TestAttrSummaryAbsentInOldSegments(t *testing.T) {
	r := openT(t, filepath.Join("testdata", "v1.rseg"))
	if r.HasAttrSummary() || r.AttrSummaryErr() != nil || !r.SegmentMayContainAttr(false, "no.such.key", "x") {
		t.Fatal("a fixture without section 19 has a summary that rejects")
	}
	spans, _, _ := lookAlikeCorpus()
	writeNoAttrSummary = true
	path, _ := writeCorpus(t, map[string][]model.Span{"p": spans}, WriterOptions{BlockSpans: 100})
	writeNoAttrSummary = false
	r = openT(t, path)
	if r.HasAttrSummary() || !r.SegmentMayContainAttr(false, "customer.name", "nobody") || r.IntEntriesCoverDoubles() {
		t.Fatal("a segment written without section 19 has a summary that rejects, or says its int entries cover doubles")
	}
	v, err := Verify(path)
	if err != nil || !v.Clean() {
		t.Fatalf("Verify: %v %v", err, v.Problems)
	}
}

// TestSaltedBlockFilters checks both forms of the block filters: section
// 20 (salted, written now) with a section 3 that passes everything for
// readers that do not know section 20, and section 3 alone (committed
// fixtures, a writer told to write it): every present entry passes its
// block's filter.
func TestSaltedBlockFilters(t *testing.T) {
	spans, _, _ := lookAlikeCorpus()
	check := func(t *testing.T, r *Reader, salted bool) {
		t.Helper()
		if r.bloomSalted != salted {
			t.Fatalf("salted filters %v, want %v", r.bloomSalted, salted)
		}
		for i := range r.Blocks() {
			got, err := r.ReadBlock(i)
			if err != nil {
				t.Fatal(err)
			}
			for e, keyLen := range attrEntries(got, r.IntEntriesCoverDoubles()) {
				resource, key, tv := e[0] == 'r', e[1:1+keyLen], e[2+keyLen:]
				ok := false
				switch tv[0] {
				case tagString:
					ok = r.MayContainAttr(i, resource, key, tv[1:])
				case tagInt:
					ok = r.MayContainIntAttr(i, resource, key, int64(le.Uint64([]byte(tv[1:]))))
				}
				if !ok {
					t.Fatalf("block %d filter rejects its entry %q", i, e)
				}
			}
		}
	}
	path, _ := writeCorpus(t, map[string][]model.Span{"p": spans}, WriterOptions{BlockSpans: 100})
	r := openT(t, path)
	check(t, r, true)
	// What a reader without section 20 sees: filters that pass everything.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	e := tocEntries(t, data)[sectionAttrBlooms]
	s, _, err := r.loadSection(e)
	if err != nil {
		t.Fatal(err)
	}
	old, err := decodeBlooms(s, len(r.Blocks()))
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range old {
		if !f.TestString(fmt.Sprintf("anything %d", i)) {
			t.Fatalf("section 3 filter %d rejects: a reader without section 20 would miss spans", i)
		}
	}

	writeUnsaltedBlooms = true
	path, _ = writeCorpus(t, map[string][]model.Span{"p": spans}, WriterOptions{BlockSpans: 100})
	writeUnsaltedBlooms = false
	check(t, openT(t, path), false)
	check(t, openT(t, filepath.Join("testdata", "v1.rseg")), false)
}

// tocEntries reads the table of contents of a segment file's bytes.
func tocEntries(t *testing.T, data []byte) map[uint32]tocEntry {
	t.Helper()
	foot := data[len(data)-footerLen:]
	tocOff := le.Uint64(foot[0:])
	n := int(le.Uint32(data[tocOff:]))
	out := map[uint32]tocEntry{}
	for i := 0; i < n; i++ {
		p := data[tocOff+4+uint64(i)*tocEntryLen:]
		e := tocEntry{Type: le.Uint32(p[0:]), Flags: le.Uint32(p[4:]), Codec: le.Uint32(p[8:]), CRC: le.Uint32(p[12:]),
			Offset: le.Uint64(p[16:]), Length: le.Uint64(p[24:]), RawLen: le.Uint64(p[32:])}
		out[e.Type] = e
	}
	return out
}

// TestAttrSectionsDamaged checks what damage to sections 19 and 20 does: a
// damaged summary does not fail Open (the segment is answered without it,
// nothing pruned) and is reported by AttrSummaryErr; damaged block filters
// fail Open like damaged section 3 filters; Verify reports both as
// derivable, naming the section.
func TestAttrSectionsDamaged(t *testing.T) {
	spans, _, _ := lookAlikeCorpus()
	path, _ := writeCorpus(t, map[string][]model.Span{"p": spans}, WriterOptions{BlockSpans: 100})
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	toc := tocEntries(t, orig)
	bad := filepath.Join(t.TempDir(), "bad.rseg")
	damage := func(t *testing.T, typ uint32) {
		t.Helper()
		e, ok := toc[typ]
		if !ok {
			t.Fatalf("no section %d", typ)
		}
		data := append([]byte(nil), orig...)
		data[e.Offset+e.Length/2] ^= 0x40
		if err := os.WriteFile(bad, data, 0o644); err != nil {
			t.Fatal(err)
		}
		v, err := Verify(bad)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, p := range v.Problems {
			if strings.Contains(p.Msg, fmt.Sprintf("section type %d (%s) checksum mismatch", typ, sectionName(typ))) {
				found = true
				if !p.Derivable || p.Offset != int64(e.Offset) {
					t.Errorf("problem %v: want derivable at offset %d", p, e.Offset)
				}
			}
		}
		if !found || !v.Repairable() {
			t.Fatalf("Verify of damaged section %d: %v (repairable %v)", typ, v.Problems, v.Repairable())
		}
	}
	t.Run("summary", func(t *testing.T) {
		damage(t, sectionAttrSummary)
		r, err := Open(bad)
		if err != nil {
			t.Fatalf("Open with a damaged summary: %v", err)
		}
		defer r.Close()
		if r.HasAttrSummary() || !IsCorruption(r.AttrSummaryErr()) || !r.SegmentMayContainAttr(false, "no.such.key", "x") {
			t.Fatalf("damaged summary: has %v, err %v", r.HasAttrSummary(), r.AttrSummaryErr())
		}
		if !r.MayContainAttr(0, false, "order.id", norm.NFC.String("ord-é-1000")) {
			t.Fatal("block filters lost with the summary")
		}
	})
	t.Run("salted block filters", func(t *testing.T) {
		damage(t, sectionAttrBloomsSalted)
		if _, err := Open(bad); !IsCorruption(err) {
			t.Fatalf("Open with damaged block filters: %v, want a corruption error", err)
		}
	})
}

// FuzzDecodeAttrSummary feeds mutated attribute value summaries (section
// 19, decompressed) to the decoder and asks the decoded ones about values:
// nothing may panic, and a summary that decodes answers every entry it was
// built from when it is the writer's own.
func FuzzDecodeAttrSummary(f *testing.F) {
	spans, _, _ := lookAlikeCorpus()
	for _, n := range []int{0, 1, 3, 300, len(spans)} {
		a := newAttrSummaryWriter()
		entries := attrEntries(spans[:n], true)
		a.addBlock(entries)
		b, err := a.encode(uint64(n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{3, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 's', 'k', 1, 1, 2, 1, 'v'})
	probe := [][]byte{appendBloomStr(nil, false, "customer.name", "Zoë"), appendBloomStr(nil, false, "order.id", "x"),
		appendBloomInt(nil, false, "http.response.status_code", 200), appendBloomStr(nil, true, "", "")}
	keyEnds := []int{1 + len("customer.name"), 1 + len("order.id"), 1 + len("http.response.status_code"), 1}
	f.Fuzz(func(t *testing.T, data []byte) {
		x, err := decodeAttrSummary(string(data))
		if err != nil {
			return
		}
		for i, p := range probe {
			x.mayContain(p, keyEnds[i])
		}
	})
}

// TestAttrSummaryOverEntryBound checks a segment with more distinct entries
// than the filter takes: no filter is written, keys listed with their
// values stay exact, keys without a dictionary pass every value, and
// absent keys are still rejected.
func TestAttrSummaryOverEntryBound(t *testing.T) {
	spans, _, orders := lookAlikeCorpus()
	old := maxAttrSummaryEntries
	maxAttrSummaryEntries = 100
	path, _ := writeCorpus(t, map[string][]model.Span{"p": spans}, WriterOptions{BlockSpans: 100})
	maxAttrSummaryEntries = old
	r := openT(t, path)
	if !r.HasAttrSummary() || r.attrs.filter {
		t.Fatalf("summary %v, filter %v: want a summary without filter", r.HasAttrSummary(), r.attrs.filter)
	}
	if !r.SegmentMayContainAttr(false, "order.id", "absent") || !r.SegmentMayContainAttr(false, "order.id", norm.NFC.String(orders[0])) {
		t.Error("a key without dictionary rejects a value with no filter to ask")
	}
	if r.SegmentMayContainAttr(false, "customer.name", "nobody") || !r.SegmentMayContainAttr(false, "customer.name", norm.NFC.String("Zoë")) {
		t.Error("a key with a dictionary answers wrongly")
	}
	if r.SegmentMayContainAttr(false, "no.such.key", "x") {
		t.Error("an absent key passes")
	}
	if v, err := Verify(path); err != nil || !v.Clean() {
		t.Fatalf("Verify: %v %v", err, v.Problems)
	}
}
