package llm

import (
	"strings"

	"github.com/rastro-dev/rastro/internal/model"
)

// Token-count slots filled by the attribute scan.
const (
	nInput          = iota // gen_ai.usage.input_tokens (OTel current)
	nPrompt                // gen_ai.usage.prompt_tokens (OTel <= 1.27, OpenLLMetry)
	nOutput                // gen_ai.usage.output_tokens
	nCompletion            // gen_ai.usage.completion_tokens
	nCacheRead             // gen_ai.usage.cache_read.input_tokens
	nCacheReadOld          // gen_ai.usage.cache_read_input_tokens (OpenLLMetry)
	nCacheWrite            // gen_ai.usage.cache_creation.input_tokens
	nCacheWriteAlt         // gen_ai.usage.cache_write.input_tokens (renamed upstream)
	nCacheWriteOld         // gen_ai.usage.cache_creation_input_tokens (OpenLLMetry)
	nReasoning             // gen_ai.usage.reasoning.output_tokens
	nReasoningOld          // gen_ai.usage.reasoning_tokens
	nTotal                 // gen_ai.usage.total_tokens
	nTotalTraceloop        // llm.usage.total_tokens (OpenLLMetry)
	nOIPrompt              // llm.token_count.prompt (OpenInference)
	nOICompletion          // llm.token_count.completion
	nOITotal               // llm.token_count.total
	nOICacheRead           // llm.token_count.prompt_details.cache_read
	nOICacheWrite          // llm.token_count.prompt_details.cache_write
	nOIReasoning           // llm.token_count.completion_details.reasoning
	numSlots
)

// String slots filled by the attribute scan.
const (
	sProvider          = iota // gen_ai.provider.name
	sSystem                   // gen_ai.system
	sOIProvider               // llm.provider
	sOISystem                 // llm.system
	sReqModel                 // gen_ai.request.model
	sRespModel                // gen_ai.response.model
	sOIModel                  // llm.model_name
	sOIParams                 // llm.invocation_parameters (JSON)
	sLFModel                  // langfuse.observation.model.name
	sOperation                // gen_ai.operation.name
	sRequestType              // llm.request.type (OpenLLMetry)
	sOIKind                   // openinference.span.kind
	sTLKind                   // traceloop.span.kind
	sLFType                   // langfuse.observation.type
	sTLEntity                 // traceloop.entity.name
	sConversation             // gen_ai.conversation.id
	sSession                  // session.id
	sLFSession                // langfuse.session.id
	sTLSession                // traceloop.association.properties.session_id
	sUser                     // user.id
	sLFUser                   // langfuse.user.id
	sTLUser                   // traceloop.association.properties.user_id
	sEndUser                  // enduser.id
	sGenAIAgent               // gen_ai.agent.name
	sOIAgent                  // agent.name
	sGenAITool                // gen_ai.tool.name
	sOITool                   // tool.name
	sLFUsage                  // langfuse.observation.usage_details (JSON)
	sLFCost                   // langfuse.observation.cost_details (JSON)
	sLFCompletionStart        // langfuse.observation.completion_start_time
	numStrings
)

// Real-number slots (USD, seconds).
const (
	fCostTotal      = iota // llm.cost.total (OpenInference, USD)
	fCostPrompt            // llm.cost.prompt
	fCostCompletion        // llm.cost.completion
	fGenAICost             // gen_ai.usage.cost (Langfuse reads it; not OTel)
	fTTFC                  // gen_ai.response.time_to_first_chunk (seconds)
	fTTFT                  // gen_ai.response.time_to_first_token (seconds)
	numFloats
)

// scan holds what one pass over a span's attributes found. It lives on the
// stack of Extract; nothing in it escapes.
type scan struct {
	llm    bool // a key that only LLM instrumentation sends was seen
	nHave  uint32
	sHave  uint32
	fHave  uint8
	nums   [numSlots]int64
	strs   [numStrings]string
	floats [numFloats]float64
}

func (s *scan) num(slot int) (int64, bool) { return s.nums[slot], s.nHave&(1<<slot) != 0 }
func (s *scan) str(slot int) string        { return s.strs[slot] }
func (s *scan) flt(slot int) (float64, bool) {
	return s.floats[slot], s.fHave&(1<<slot) != 0
}

func (s *scan) setNum(slot int, v model.Value, onlyEmpty bool) {
	if onlyEmpty && s.nHave&(1<<slot) != 0 {
		return
	}
	if n, ok := count(v); ok {
		s.nums[slot] = n
		s.nHave |= 1 << slot
	}
}

func (s *scan) setStr(slot int, v model.Value, onlyEmpty bool) {
	if onlyEmpty && s.sHave&(1<<slot) != 0 {
		return
	}
	var str string
	switch v.Type {
	case model.ValueString:
		str = v.Str
	case model.ValueInt, model.ValueDouble, model.ValueBool:
		str = v.AsString()
	default:
		return
	}
	if str == "" {
		return
	}
	s.strs[slot] = str
	s.sHave |= 1 << slot
}

func (s *scan) setFloat(slot int, v model.Value, onlyEmpty bool) {
	if onlyEmpty && s.fHave&(1<<slot) != 0 {
		return
	}
	if f, ok := number(v); ok {
		s.floats[slot] = f
		s.fHave |= 1 << slot
	}
}

// add scans attributes. onlyEmpty fills only slots still empty (used for
// resource attributes, which lose to the span's own).
func (s *scan) add(kvs []model.KeyValue, onlyEmpty bool) {
	for i := range kvs {
		k := kvs[i].Key
		if len(k) < 7 {
			continue
		}
		switch k[0] {
		case 'g', 'l', 'o', 't', 's', 'u', 'a', 'e':
		default:
			continue
		}
		s.set(k, kvs[i].Value, onlyEmpty)
	}
}

func (s *scan) set(k string, v model.Value, o bool) {
	switch k {
	// OTel GenAI, current and legacy names.
	case "gen_ai.usage.input_tokens":
		s.setNum(nInput, v, o)
	case "gen_ai.usage.prompt_tokens":
		s.setNum(nPrompt, v, o)
	case "gen_ai.usage.output_tokens":
		s.setNum(nOutput, v, o)
	case "gen_ai.usage.completion_tokens":
		s.setNum(nCompletion, v, o)
	case "gen_ai.usage.cache_read.input_tokens":
		s.setNum(nCacheRead, v, o)
	case "gen_ai.usage.cache_read_input_tokens":
		s.setNum(nCacheReadOld, v, o)
	case "gen_ai.usage.cache_creation.input_tokens":
		s.setNum(nCacheWrite, v, o)
	case "gen_ai.usage.cache_write.input_tokens":
		s.setNum(nCacheWriteAlt, v, o)
	case "gen_ai.usage.cache_creation_input_tokens":
		s.setNum(nCacheWriteOld, v, o)
	case "gen_ai.usage.reasoning.output_tokens":
		s.setNum(nReasoning, v, o)
	case "gen_ai.usage.reasoning_tokens":
		s.setNum(nReasoningOld, v, o)
	case "gen_ai.usage.total_tokens":
		s.setNum(nTotal, v, o)
	case "gen_ai.usage.cost":
		s.setFloat(fGenAICost, v, o)
	case "gen_ai.provider.name":
		s.setStr(sProvider, v, o)
	case "gen_ai.system":
		s.setStr(sSystem, v, o)
	case "gen_ai.request.model":
		s.setStr(sReqModel, v, o)
	case "gen_ai.response.model":
		s.setStr(sRespModel, v, o)
	case "gen_ai.operation.name":
		s.setStr(sOperation, v, o)
	case "gen_ai.conversation.id":
		s.setStr(sConversation, v, o)
	case "gen_ai.agent.name":
		s.setStr(sGenAIAgent, v, o)
	case "gen_ai.tool.name":
		s.setStr(sGenAITool, v, o)
	case "gen_ai.response.time_to_first_chunk":
		s.setFloat(fTTFC, v, o)
	case "gen_ai.response.time_to_first_token":
		s.setFloat(fTTFT, v, o)

	// OpenInference.
	case "openinference.span.kind":
		s.setStr(sOIKind, v, o)
		s.llm = true
	case "llm.provider":
		s.setStr(sOIProvider, v, o)
	case "llm.system":
		s.setStr(sOISystem, v, o)
	case "llm.model_name":
		s.setStr(sOIModel, v, o)
	case "llm.invocation_parameters":
		s.setStr(sOIParams, v, o)
	case "llm.token_count.prompt":
		s.setNum(nOIPrompt, v, o)
	case "llm.token_count.completion":
		s.setNum(nOICompletion, v, o)
	case "llm.token_count.total":
		s.setNum(nOITotal, v, o)
	case "llm.token_count.prompt_details.cache_read":
		s.setNum(nOICacheRead, v, o)
	case "llm.token_count.prompt_details.cache_write":
		s.setNum(nOICacheWrite, v, o)
	case "llm.token_count.completion_details.reasoning":
		s.setNum(nOIReasoning, v, o)
	case "llm.cost.total":
		s.setFloat(fCostTotal, v, o)
	case "llm.cost.prompt":
		s.setFloat(fCostPrompt, v, o)
	case "llm.cost.completion":
		s.setFloat(fCostCompletion, v, o)
	case "session.id":
		s.setStr(sSession, v, o)
	case "user.id":
		s.setStr(sUser, v, o)
	case "enduser.id":
		s.setStr(sEndUser, v, o)
	case "agent.name":
		s.setStr(sOIAgent, v, o)
	case "tool.name":
		s.setStr(sOITool, v, o)

	// OpenLLMetry.
	case "llm.request.type":
		s.setStr(sRequestType, v, o)
	case "llm.usage.total_tokens":
		s.setNum(nTotalTraceloop, v, o)
	case "traceloop.span.kind":
		s.setStr(sTLKind, v, o)
		s.llm = true
	case "traceloop.entity.name":
		s.setStr(sTLEntity, v, o)
	case "traceloop.association.properties.session_id":
		s.setStr(sTLSession, v, o)
	case "traceloop.association.properties.user_id":
		s.setStr(sTLUser, v, o)

	// Langfuse.
	case "langfuse.session.id":
		s.setStr(sLFSession, v, o)
	case "langfuse.user.id":
		s.setStr(sLFUser, v, o)
	case "langfuse.observation.type":
		s.setStr(sLFType, v, o)
	case "langfuse.observation.model.name":
		s.setStr(sLFModel, v, o)
	case "langfuse.observation.usage_details":
		s.setStr(sLFUsage, v, o)
	case "langfuse.observation.cost_details":
		s.setStr(sLFCost, v, o)
	case "langfuse.observation.completion_start_time":
		s.setStr(sLFCompletionStart, v, o)
	default:
		if k[0] == 't' && strings.HasPrefix(k, "traceloop.association.properties.") {
			switch k[len("traceloop.association.properties."):] {
			case "session.id", "sessionId", "session":
				s.setStr(sTLSession, v, o)
			case "user.id", "userId", "user":
				s.setStr(sTLUser, v, o)
			}
		}
		return
	}
	// Every key above except the generic session/user/agent/tool names is
	// sent only by LLM instrumentation.
	switch k {
	case "session.id", "user.id", "enduser.id", "agent.name", "tool.name",
		"traceloop.association.properties.session_id", "traceloop.association.properties.user_id":
	default:
		s.llm = true
	}
}
