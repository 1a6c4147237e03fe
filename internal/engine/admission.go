package engine

// BufferUsage implements store.BufferReporter: the write buffer's estimated
// bytes for project (active and frozen buffers), in all, and
// Options.MaxBufferBytes, beyond which Append refuses with ErrBufferFull.
func (e *Engine) BufferUsage(project string) (projectBytes, totalBytes, limitBytes int64) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	projectBytes, totalBytes = e.active.projectBytes(project), e.active.bytes.Load()
	for _, m := range e.frozen {
		projectBytes += m.projectBytes(project)
		totalBytes += m.bytes.Load()
	}
	return projectBytes, totalBytes, e.opts.MaxBufferBytes
}
