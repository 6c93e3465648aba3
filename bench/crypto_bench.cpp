// The cost of frame encryption alone (net/frame_cipher.h): sealing and opening one frame
// of N bytes with XChaCha20-Poly1305, in place, as the TCP transport does per frame; and
// the join copy that sealing needs (the payload's parts into one buffer). Shows what
// bounds encrypted weight shipping on a machine: a sender seals and a receiver opens each
// byte once, each on its own core. Bytes per second are of frame payload.
// Usage: crypto_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>
#include <sodium.h>

#include <cstring>
#include <vector>

#include "net/frame_cipher.h"

namespace {

using namespace herd::net;

SessionKey test_key() {
  SessionKey key;
  for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<uint8_t>(i);
  return key;
}

void BM_Seal(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> data(n, 0x5a);
  const auto header = encode_header(FrameHeader{MessageType::WEIGHTS, 0, 1, n});
  uint8_t tag[kFrameTagBytes];
  FrameCipher cipher(test_key());
  for (auto _ : state) {
    cipher.seal(header, data, tag);
    benchmark::DoNotOptimize(data.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n));
}

void BM_Open(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const auto header = encode_header(FrameHeader{MessageType::WEIGHTS, 0, 1, n});
  // Seal a run of frames ahead, so each timed open succeeds on fresh ciphertext.
  constexpr int kFrames = 16;
  std::vector<std::vector<uint8_t>> sealed(kFrames, std::vector<uint8_t>(n, 0x5a));
  std::vector<std::array<uint8_t, kFrameTagBytes>> tags(kFrames);
  std::vector<uint8_t> work(n);
  for (auto _ : state) {
    state.PauseTiming();
    FrameCipher sender(test_key()), receiver(test_key());
    for (int i = 0; i < kFrames; ++i) {
      std::fill(sealed[i].begin(), sealed[i].end(), 0x5a);
      sender.seal(header, sealed[i], tags[i].data());
    }
    state.ResumeTiming();
    for (int i = 0; i < kFrames; ++i) {
      if (!receiver.open(header, sealed[i], tags[i].data())) state.SkipWithError("open failed");
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kFrames * n));
}

void BM_JoinCopy(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> source(n, 0x5a), buffer(n);
  for (auto _ : state) {
    std::memcpy(buffer.data(), source.data(), n);
    benchmark::DoNotOptimize(buffer.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n));
}

// The alternative not taken (yet): AES-256-GCM, hardware-accelerated on x86-64 with AES-NI
// and PCLMUL only (libsodium 1.0.18 has no ARM version), as a figure to compare.
void BM_SealAes256Gcm(benchmark::State& state) {
  if (sodium_init() < 0 || !crypto_aead_aes256gcm_is_available()) {
    state.SkipWithError("AES-256-GCM is not available on this CPU");
    return;
  }
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> data(n, 0x5a);
  const auto header = encode_header(FrameHeader{MessageType::WEIGHTS, 0, 1, n});
  uint8_t tag[crypto_aead_aes256gcm_ABYTES];
  uint8_t nonce[crypto_aead_aes256gcm_NPUBBYTES] = {};
  const SessionKey key = test_key();
  for (auto _ : state) {
    crypto_aead_aes256gcm_encrypt_detached(data.data(), tag, nullptr, data.data(), n, header.data(),
                                           header.size(), nullptr, nonce, key.data());
    ++nonce[0];
    benchmark::DoNotOptimize(data.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n));
}

// 8 KiB: a decode step's activations; 4 MiB: a weights chunk as shipping sends them.
BENCHMARK(BM_Seal)->Arg(8 << 10)->Arg(4 << 20);
BENCHMARK(BM_Open)->Arg(8 << 10)->Arg(4 << 20);
BENCHMARK(BM_JoinCopy)->Arg(4 << 20);
BENCHMARK(BM_SealAes256Gcm)->Arg(4 << 20);

}  // namespace

BENCHMARK_MAIN();
