// xxHash, header-only (XXH_INLINE_ALL): the reader needs no xxhash library at link time. Every
// shardpack source includes xxhash.h through this file, so one translation unit never mixes the
// inline and the linked declarations.
#pragma once
#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL
#endif
#include <xxhash.h>
