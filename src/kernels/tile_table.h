// A compile-time table of a tile kernel's instantiations for every (rows, tokens) shape up
// to kTileRows x kTileTokens, behind one TileFn-shaped entry point. Internal to src/kernels.
#pragma once

#include <array>
#include <cstdint>
#include <utility>

#include "kernels/tile.h"

namespace cohort::kernels {

// Kernel<R, T>::Run(w, w_stride, act, act_stride, n, out, out_stride) for R rows, T tokens.
template <template <int, int> class Kernel>
struct TileTable {
  using Fn = void (*)(const uint8_t*, int64_t, const uint8_t*, int64_t, int64_t, float*, int64_t);
  template <int R, int... Ts>
  static constexpr std::array<Fn, sizeof...(Ts)> Row(std::integer_sequence<int, Ts...>) {
    return {&Kernel<R, Ts + 1>::Run...};
  }
  template <int... Rs>
  static constexpr std::array<std::array<Fn, kTileTokens>, sizeof...(Rs)> All(
      std::integer_sequence<int, Rs...>) {
    return {Row<Rs + 1>(std::make_integer_sequence<int, kTileTokens>{})...};
  }
  static constexpr auto kFns = All(std::make_integer_sequence<int, kTileRows>{});

  static void Run(const uint8_t* w, int64_t w_stride, int n_rows, const uint8_t* act,
                  int64_t act_stride, int n_tokens, int64_t n, float* out, int64_t out_stride) {
    kFns[n_rows - 1][n_tokens - 1](w, w_stride, act, act_stride, n, out, out_stride);
  }
};

}  // namespace cohort::kernels
