// Shared by every shader: the specialization constants of the workgroup, the linear index
// of a workgroup (recorder.h lays out more groups than the x limit in x and y), and word
// reads of byte-packed data (quant blocks are 18, 34 or 210 bytes: not word-aligned).
#extension GL_GOOGLE_include_directive : enable

layout(local_size_x_id = 0, local_size_y = 1, local_size_z = 1) in;
layout(constant_id = 0) const uint WG_SIZE = 64;        // invocations per workgroup
layout(constant_id = 1) const uint SUBGROUP_SIZE = 32;  // the device's subgroup size

uint group_index() {
  return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
}
