/*
 * comm.h - the communicator room (runtime/comm): the public calls that make, split, shrink,
 * revoke, abort and destroy communicators, above the algorithm layer (runtime/algo) and the
 * executor (runtime/exec), whose steps they call in order. What its files share:
 */
#ifndef MSCCLRT_COMM_H
#define MSCCLRT_COMM_H

#include "exec/exec.h"

/* Releases c: the executor idles it and drops its contexts and kernels, the algorithm layer
 * frees its state, then the executor closes the transports and the device (comm_init.c). */
void comm_release(mscclrt_comm *c);

#endif
