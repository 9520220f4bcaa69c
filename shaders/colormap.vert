#version 330 core
// The viewport's image quad, in Dear ImGui's vertex format (its attribute locations are bound
// to these names when the program is linked).
in vec2 Position;
in vec2 UV;
in vec4 Color;
uniform mat4 ProjMtx;
out vec2 Frag_UV;
void main() {
  Frag_UV = UV;
  gl_Position = ProjMtx * vec4(Position.xy, 0.0, 1.0);
}
