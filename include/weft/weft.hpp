// weft/weft.hpp — everything in the core: concepts, communicator, algorithms, collectives.
// Transports live in their own headers: <weft/transport/inproc.hpp>, ...
#pragma once

#include "weft/buffer.hpp"
#include "weft/call.hpp"
#include "weft/collectives.hpp"
#include "weft/communicator.hpp"
#include "weft/error.hpp"
#include "weft/memory.hpp"
#include "weft/ops.hpp"
#include "weft/options.hpp"
#include "weft/recovery.hpp"
#include "weft/transport.hpp"
#include "weft/types.hpp"
