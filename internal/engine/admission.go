package engine

// BufferUsage implements store.BufferReporter: the write buffer's estimated
// bytes for project (active and frozen buffers), in all, and
// Options.MaxBufferBytes, beyond which Append refuses with ErrBufferFull.
func (e *Engine) BufferUsage(project string) (projectBytes, totalBytes, limitBytes int64) {
	totalBytes, projectBytes, _, _ = e.paceShare(project)
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

// paceShare returns the write buffers' estimate in all, project's part of
// what the projects' inserts added to it and that whole (without what
// queries built over the rows: a content filter belongs to no project, and
// counting it would leave a project writing alone short of an even share),
// and how many projects the active buffer holds rows of (at least 1).
func (e *Engine) paceShare(project string) (total, mine, rows int64, projects int) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	mine, rows, projects = e.active.projectShare(project)
	total = e.active.bytes.Load()
	for _, m := range e.frozen {
		pm, pr, _ := m.projectShare(project)
		mine, rows = mine+pm, rows+pr
		total += m.bytes.Load()
	}
	return total, mine, rows, max(1, projects)
}
