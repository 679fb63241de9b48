module t(input clk, input ce, input [7:0] a0,a1,b0,b1, output [15:0] p0,p1);
  wire [31:0] o;
  SB_MAC16 #(.MODE_8x8(1'b1), .A_SIGNED(1'b1), .B_SIGNED(1'b1), .TOP_8x8_MULT_REG(1'b1), .BOT_8x8_MULT_REG(1'b1), .TOPOUTPUT_SELECT(2'd2), .BOTOUTPUT_SELECT(2'd2)) m (
    .CLK(clk), .CE(ce), .A({a1,a0}), .B({b1,b0}), .C(16'd0), .D(16'd0), .AHOLD(1'b0), .BHOLD(1'b0), .CHOLD(1'b0), .DHOLD(1'b0),
    .IRSTTOP(1'b0), .IRSTBOT(1'b0), .ORSTTOP(1'b0), .ORSTBOT(1'b0), .OLOADTOP(1'b0), .OLOADBOT(1'b0), .ADDSUBTOP(1'b0), .ADDSUBBOT(1'b0),
    .OHOLDTOP(1'b0), .OHOLDBOT(1'b0), .CI(1'b0), .ACCUMCI(1'b0), .SIGNEXTIN(1'b0), .O(o));
  assign p1 = o[31:16]; assign p0 = o[15:0];
endmodule
