package segment

// AttrSummaryHasDict reports whether r's attribute value summary lists the
// values of the key (exact membership) rather than filtering them.
func AttrSummaryHasDict(r *Reader, resource bool, key string) bool {
	scope := "s"
	if resource {
		scope = "r"
	}
	return r.attrs.keys[scope+key] != nil
}
