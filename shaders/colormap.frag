#version 330 core
// A float image (R32F) through a colormap, on the GPU. ui/colormap.cpp is the same mapping on
// the CPU, and its tests define it: gray, viridis (9 samples, linear), diverging blue-white-red;
// values clamp to [Lo, Hi]; NaN (an unwritten pixel) is magenta.
in vec2 Frag_UV;
out vec4 Out_Color;
uniform sampler2D Value;
uniform float Lo;
uniform float Hi;
uniform int Map;  // 0 gray, 1 viridis, 2 diverging

const vec3 VIRIDIS[9] = vec3[9](vec3(0.267, 0.005, 0.329), vec3(0.279, 0.175, 0.483),
                                vec3(0.230, 0.322, 0.546), vec3(0.173, 0.449, 0.558),
                                vec3(0.128, 0.567, 0.551), vec3(0.154, 0.680, 0.504),
                                vec3(0.365, 0.789, 0.383), vec3(0.678, 0.864, 0.190),
                                vec3(0.993, 0.906, 0.144));

void main() {
  float v = texture(Value, Frag_UV).r;
  if (isnan(v)) {
    Out_Color = vec4(1.0, 0.0, 1.0, 1.0);
    return;
  }
  float span = Hi - Lo;
  float t = span > 0.0 ? clamp((v - Lo) / span, 0.0, 1.0) : (v >= Hi ? 1.0 : 0.0);
  vec3 c;
  if (Map == 0) {
    c = vec3(t);
  } else if (Map == 1) {
    float p = t * 8.0;
    int i = min(int(p), 7);
    c = mix(VIRIDIS[i], VIRIDIS[i + 1], p - float(i));
  } else {
    float s = 2.0 * t - 1.0;
    c = s < 0.0 ? vec3(1.0 + s, 1.0 + s, 1.0) : vec3(1.0, 1.0 - s, 1.0 - s);
  }
  Out_Color = vec4(c, 1.0);
}
