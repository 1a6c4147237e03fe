package bench

import (
	"math/rand/v2"
	"strings"
)

// words is the vocabulary prompts and completions are drawn from.
var words = strings.Fields(`the a an and or but if then so because while when where which who what how why
is are was were be been being have has had do does did can could should would will may might must
customer order invoice refund payment account password login error timeout latency request response
service database query index cache token model prompt completion answer question user assistant system
document page section summary report chart table result value number date time week month year
please help explain describe summarize translate compare list find show check update create delete
first second next last new old large small fast slow simple complex clear short long correct wrong
retry limit quota budget cost price plan tier upgrade downgrade cancel subscription trial feature bug
deploy release version branch commit review test build pipeline cluster node pod container image
search retrieve context chunk embedding vector similarity score rank filter source citation link
policy rule guideline safety privacy data record field schema format json csv text code function
we you they it this that these those our your their my its here there now today soon always never
agent tool call step plan task goal memory session conversation history message reply draft final`)

// systemPrompts are long instructions shared by many LLM calls, as real
// applications reuse one system prompt per agent.
var systemPrompts = func() []string {
	r := rand.New(rand.NewPCG(7, 7))
	out := make([]string, 5)
	for i := range out {
		out[i] = "You are a careful assistant. " + sentence(r, 160+20*i)
	}
	return out
}()

// sentence returns n words drawn from r, with occasional full stops.
func sentence(r *rand.Rand, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[r.IntN(len(words))])
		if i%12 == 11 && i != n-1 {
			b.WriteByte('.')
		}
	}
	b.WriteByte('.')
	return b.String()
}
