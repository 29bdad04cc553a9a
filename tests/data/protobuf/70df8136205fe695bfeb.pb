
@
m.protop"
Sub
z (Rz"
M
one (2.p.SubRone