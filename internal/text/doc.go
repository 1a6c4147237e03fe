// Package text holds the semantics of Rastro's full-text (content) search:
// how texts are cut into tokens, which texts of a span are searched, how a
// content query is parsed and when a span matches it. The engine's token
// filters store Hash values of the tokens SpanTokens reports; a query's
// Hashes must all be present for a span to match, so a block whose filter
// lacks one is skipped.
//
// # Tokens
//
// A token is a maximal run of letters, digits and combining marks, in any
// script, after this folding:
//   - compatibility decomposition (NFKD): fullwidth ＡＢＣ is abc, the ligature
//     ﬁ is fi, ² is 2, ① is 1, halfwidth ｶ is カ;
//   - case folding (Unicode simple folding, through upper case, so final
//     sigma ς is σ and ſ is s), plus ß and ẞ to ss: "Straße" is "strasse";
//   - diacritics dropped after Latin, Greek, Cyrillic, Armenian, Hebrew and
//     Arabic letters (café = cafe = CAFÉ, ñ is n, ü is u, ø stays ø since it
//     has no decomposition, й is и, Hebrew points and Arabic harakat go).
//     Marks after other letters (Devanagari, Bengali, Thai vowel signs...)
//     are part of the word and kept. Hangul syllables are kept composed.
//
// Every normalisation form of a text gives the same tokens: a character
// followed by marks that composition joins to it or reorders (NFD kana and
// Hangul, as in macOS file names; halfwidth ｶﾞ; marks typed out of
// canonical order) is taken in its NFKC form, so ガ, カ+U+3099 and ｶﾞ are
// all the token ガ. Segments written before this rule index such text by
// its old tokens (ｶﾞ was カ); a merge re-indexes what it rewrites. Not folded: compatibility characters that stand for
// several kana or for Hangul letters (squared ㌔, parenthesised ㈜, the
// digraph ゟ) are found only as themselves.
//
// Everything else separates tokens: white space, punctuation (so
// "user_id" is user, id and "https://a.io/x?q=1" is https, a, io, x, q, 1),
// symbols, control characters. Format characters (zero-width joiner and
// non-joiner, soft hyphen, bidi marks), variation selectors and emoji
// skin-tone modifiers are dropped without separating.
//
// Some characters are a token each, because their scripts write words
// without spaces or because they are pictures:
//   - Han ideographs, Hiragana, Katakana (with ー), Bopomofo: 退款 is the
//     tokens 退 and 款; a query for 退款 requires them adjacent (see
//     ParseQuery), which is how a word is found in text with no spaces.
//   - emoji (an approximation of Extended_Pictographic: the emoji and
//     pictograph blocks, dingbats, miscellaneous symbols and technical, and
//     the older symbols with emoji forms): 👍🏽 is 👍 (skin tone dropped);
//     the family 👨‍👩‍👧 is the three tokens 👨, 👩, 👧 (joiners dropped);
//     a flag, two regional indicators, is one token 🇫🇷; a keycap 1️⃣ is 1.
//
// Tokens are valid UTF-8, never empty, and at most MaxTokenLen (64) bytes:
// a longer run is cut to its longest prefix of whole characters that fits,
// and the rest of the run is dropped. Tokenising a token gives back that
// token. Digits other than ASCII are kept as they are (٣ is not 3).
//
// # Sources
//
// Sources reports the searchable texts of a span with a label. Searched
// whatever their length:
//   - LLM messages of every dialect (docs/llm.md): gen_ai.input.messages,
//     gen_ai.output.messages, gen_ai.system_instructions (OTel GenAI);
//     gen_ai.prompt and gen_ai.completion (JSON, legacy; on the span or on
//     the gen_ai.content.prompt / gen_ai.content.completion events);
//     gen_ai.prompt.N.*, gen_ai.completion.N.* (OpenLLMetry) and
//     llm.input_messages.N.*, llm.output_messages.N.* (OpenInference) keys
//     ending in .content, .text or .arguments; input.value, output.value;
//     langfuse.observation.input/.output, langfuse.trace.input/.output;
//     gen_ai.tool.call.arguments and gen_ai.tool.call.result;
//   - exception.message, exception.type and exception.stacktrace;
//   - every string attribute of every event (for example the content of
//     gen_ai.user.message and gen_ai.choice events, and the exception
//     event), except the structural keys below;
//   - the status message.
//
// Any other span attribute is searched when its value is a string of at
// least minLen bytes (DefaultMinLen, 32, unless the caller says otherwise):
// long URLs, SQL, user agents, free-text annotations. Resource and scope
// attributes are not searched: they describe the process, are shared by
// every span it sends, and would make every word of them match everything.
// Span names are not searched either (the name filter does that).
//
// A string value that holds a JSON object or array (as message attributes
// do) is searched by its string values, escapes decoded, not by its keys;
// the values of the structural keys role, type, finish_reason, id and
// tool_call_id are skipped, so that "user" or "stop" does not match every
// LLM span. Structured (array and key/value) attribute values of the known
// text attributes and of events are searched the same way.
//
// # Queries
//
// A query is words and "quoted phrases" (see ParseQuery). A span matches
// when every word is a token of one of its texts, and each phrase appears
// as consecutive tokens inside one text (one message, one attribute, one
// JSON string): a phrase never spans two texts.
package text
