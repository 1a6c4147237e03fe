package otlp

import "google.golang.org/protobuf/encoding/protowire"

// protoCounts sizes the decoder's slabs exactly, so that decoding a request
// allocates each slab once instead of regrowing (and copying) it.
type protoCounts struct {
	spans, attrs, events, eventAttrs, links, linkAttrs int
}

// eachField calls fn for every length-delimited field of a message and stops
// quietly at malformed input: the decoder proper reports errors.
func eachField(b []byte, fn func(num protowire.Number, v []byte)) {
	for len(b) > 0 {
		var num protowire.Number
		var typ protowire.Type
		if c := b[0]; c < 0x80 && c>>3 != 0 { // a one-byte tag, as readers take it
			num, typ, b = protowire.Number(c>>3), protowire.Type(c&7), b[1:]
			if typ == protowire.BytesType && len(b) > 0 && b[0] < 0x80 && int(b[0]) < len(b) {
				n := 1 + int(b[0])
				fn(num, b[1:n])
				b = b[n:]
				continue
			}
		} else {
			var n int
			num, typ, n = protowire.ConsumeTag(b)
			if n < 0 {
				return
			}
			b = b[n:]
		}
		if typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return
			}
			fn(num, v)
			b = b[n:]
			continue
		}
		n := protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return
		}
		b = b[n:]
	}
}

func countRequest(b []byte) protoCounts {
	var c protoCounts
	eachField(b, func(num protowire.Number, rs []byte) {
		if num != 1 {
			return
		}
		eachField(rs, func(num protowire.Number, ss []byte) {
			if num != 2 {
				return
			}
			eachField(ss, func(num protowire.Number, sp []byte) {
				if num != 2 {
					return
				}
				c.spans++
				eachField(sp, func(num protowire.Number, v []byte) {
					switch num {
					case 9:
						c.attrs++
					case 11:
						c.events++
						eachField(v, func(num protowire.Number, _ []byte) {
							if num == 3 {
								c.eventAttrs++
							}
						})
					case 13:
						c.links++
						eachField(v, func(num protowire.Number, _ []byte) {
							if num == 4 {
								c.linkAttrs++
							}
						})
					}
				})
			})
		})
	})
	return c
}
