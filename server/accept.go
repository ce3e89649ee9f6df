package server

import "syscall"

// syscallEMFILE: out of file descriptors; Accept is retried after a pause.
var syscallEMFILE = syscall.EMFILE
