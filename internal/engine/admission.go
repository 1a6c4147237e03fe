package engine

// BufferUsage implements store.BufferReporter: the write buffer's estimated
// bytes for project (active and frozen buffers), in all, and
// Options.MaxBufferBytes, beyond which Append refuses with ErrBufferFull.
func (e *Engine) BufferUsage(project string) (projectBytes, totalBytes, limitBytes int64) {
	projectBytes, totalBytes, _ = e.paceShare(project)
	return projectBytes, totalBytes, e.opts.MaxBufferBytes
}

// PaceBytes implements store.BufferReporter: the buffered bytes from which
// Append holds a request (pace), 0 when it never does.
func (e *Engine) PaceBytes() int64 {
	limit := 2 * e.opts.SealBytes
	if limit >= e.opts.MaxBufferBytes || e.sealErr.Load() != nil {
		return 0
	}
	return limit
}

// paceShare returns the write buffers' bytes for project and in all, and
// how many projects the active buffer holds rows of (at least 1).
func (e *Engine) paceShare(project string) (mine, total int64, projects int) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	mine, total = e.active.projectBytes(project), e.active.bytes.Load()
	for _, m := range e.frozen {
		mine += m.projectBytes(project)
		total += m.bytes.Load()
	}
	return mine, total, max(1, e.active.projectCount())
}
