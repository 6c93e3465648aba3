// Sums and maxima over a workgroup, returned to every invocation. USE_SUBGROUP: within each
// subgroup by subgroup operations, then across subgroups through shared memory; otherwise a
// shared-memory tree (REQUIRES: WG_SIZE a power of two). Every invocation must call these
// (they hold barriers).
#ifdef USE_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

shared float reduce_scratch[WG_SIZE];

float workgroup_sum(float v) {
#ifdef USE_SUBGROUP
  v = subgroupAdd(v);
  if (subgroupElect()) reduce_scratch[gl_SubgroupID] = v;
  barrier();
  float total = 0.0;
  for (uint i = 0; i < gl_NumSubgroups; ++i) total += reduce_scratch[i];
#else
  const uint tid = gl_LocalInvocationID.x;
  reduce_scratch[tid] = v;
  barrier();
  for (uint s = WG_SIZE / 2; s > 0; s >>= 1) {
    if (tid < s) reduce_scratch[tid] += reduce_scratch[tid + s];
    barrier();
  }
  const float total = reduce_scratch[0];
#endif
  barrier();  // every invocation has read the scratch before the next call writes it
  return total;
}

float workgroup_max(float v) {
#ifdef USE_SUBGROUP
  v = subgroupMax(v);
  if (subgroupElect()) reduce_scratch[gl_SubgroupID] = v;
  barrier();
  float total = reduce_scratch[0];
  for (uint i = 1; i < gl_NumSubgroups; ++i) total = max(total, reduce_scratch[i]);
#else
  const uint tid = gl_LocalInvocationID.x;
  reduce_scratch[tid] = v;
  barrier();
  for (uint s = WG_SIZE / 2; s > 0; s >>= 1) {
    if (tid < s) reduce_scratch[tid] = max(reduce_scratch[tid], reduce_scratch[tid + s]);
    barrier();
  }
  const float total = reduce_scratch[0];
#endif
  barrier();
  return total;
}
