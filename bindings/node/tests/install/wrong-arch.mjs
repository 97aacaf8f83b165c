// Imports the installed package as a process on another CPU would (process.arch "arm64"): the
// package must refuse with its own error, naming the platform. Run by scripts/install-test.mjs.
Object.defineProperty(process, 'arch', { value: 'arm64' })
await import('sessionlog-node')
